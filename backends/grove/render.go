package grove

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"time"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
)

// AnnotationCliques records, on a PodCliqueSet, which clique or scaling group holds each
// service: Grove names are short and DNS-safe, service names need not be.
const AnnotationCliques = "nvidia.com/dgd-cliques"

// TerminationDelay is set explicitly (Grove's default): a clique below its minAvailable
// for this long has its PodCliqueSet replica gang-terminated.
const TerminationDelay = 4 * time.Hour

// placement says where a service lives inside a PodCliqueSet.
type placement struct {
	// Clique is the standalone clique of a single-node service.
	Clique string `json:"clique,omitempty"`
	// Group is the scaling group of a multinode service; its cliques are Group+"-l"
	// (the leader, 1 pod) and Group+"-w" (nodeCount-1 workers).
	Group string `json:"group,omitempty"`
}

// shortName makes a DNS-label name of at most max characters; a longer one keeps a
// prefix and a digest of the whole, so distinct services stay distinct.
func shortName(service string, max int) string {
	s := strings.Trim(strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, service), "-")
	if len(s) <= max {
		return s
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(service))
	return strings.TrimRight(s[:max-5], "-") + fmt.Sprintf("-%04x", h.Sum32()&0xffff)
}

func placementOf(svc *v1alpha1.DynamoComponentDeploymentSharedSpec, service string) placement {
	if svc.IsMultinode() {
		return placement{Group: shortName(service, 12)}
	}
	return placement{Clique: shortName(service, 20)}
}

// render builds the PodCliqueSet of one pool: every service of a worker revision, or the
// stable services. Replicas 1; every field Grove's defaulting webhook would set is set.
func render(dgd *v1alpha1.DynamoGraphDeployment, pool backends.Pool) (*grovev1.PodCliqueSet, error) {
	tmpl := grovev1.PodCliqueSetTemplateSpec{
		StartupType:           ptr.To(grovev1.CliqueStartupTypeAnyOrder),
		TerminationDelay:      &metav1.Duration{Duration: TerminationDelay},
		HeadlessServiceConfig: &grovev1.HeadlessServiceConfig{PublishNotReadyAddresses: true},
	}
	places := map[string]placement{}
	services := append([]backends.ServiceWorkload(nil), pool.Services...)
	sort.Slice(services, func(i, j int) bool { return services[i].Service < services[j].Service })
	for _, sw := range services {
		pod, err := backends.PodTemplate(dgd, sw.Service, sw.Hash, sw.Spec, dgd.Spec.Envs)
		if err != nil {
			return nil, err
		}
		pl := placementOf(sw.Spec, sw.Service)
		places[sw.Service] = pl
		if pl.Clique != "" {
			// minAvailable 1: a planned scale-down to any count >= 1 never crosses it.
			tmpl.Cliques = append(tmpl.Cliques, clique(pl.Clique, pod, max(sw.Replicas, 1), 1))
			continue
		}
		n := sw.Spec.NodeCount()
		tmpl.Cliques = append(tmpl.Cliques, clique(pl.Group+"-l", pod, 1, 1), clique(pl.Group+"-w", pod, n-1, n-1))
		tmpl.PodCliqueScalingGroupConfigs = append(tmpl.PodCliqueScalingGroupConfigs, grovev1.PodCliqueScalingGroupConfig{
			Name: pl.Group, CliqueNames: []string{pl.Group + "-l", pl.Group + "-w"},
			Replicas: ptr.To(max(sw.Replicas, 1)), MinAvailable: ptr.To[int32](1),
		})
	}
	raw, _ := json.Marshal(places)
	pcs := &grovev1.PodCliqueSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: backends.GroupName(dgd.Name, pool.Hash), Namespace: dgd.Namespace, Labels: pcsLabels(dgd, pool.Hash),
			Annotations: map[string]string{AnnotationCliques: string(raw)},
		},
		Spec: grovev1.PodCliqueSetSpec{
			Replicas:       1,
			UpdateStrategy: &grovev1.PodCliqueSetUpdateStrategy{Type: grovev1.RollingRecreateStrategy},
			Template:       tmpl,
		},
	}
	pcs.Annotations[backends.AnnotationTemplateHash] = backends.TemplateHash(pcs.Spec.Template)
	return pcs, nil
}

func clique(name string, pod corev1.PodTemplateSpec, replicas, minAvailable int32) *grovev1.PodCliqueTemplateSpec {
	spec := *pod.Spec.DeepCopy()
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	}
	return &grovev1.PodCliqueTemplateSpec{
		Name: name, Labels: pod.Labels, Annotations: pod.Annotations,
		Spec: grovev1.PodCliqueSpec{RoleName: name, PodSpec: spec, Replicas: replicas, MinAvailable: ptr.To(minAvailable)},
	}
}

// pcsLabels are the labels of a PodCliqueSet: the graph, the worker hash (none on the
// stable one) and managed-by.
func pcsLabels(dgd *v1alpha1.DynamoGraphDeployment, hash string) map[string]string {
	labels := backends.SelectorLabels(dgd, "", hash)
	delete(labels, v1alpha1.LabelService)
	labels[v1alpha1.LabelManagedBy] = v1alpha1.ManagedByValue
	return labels
}

// placements maps each service of a PodCliqueSet to its clique or scaling group. It
// reads the template, which the API server keeps as written (every clique's labels
// name its service; a clique listed by a scaling group belongs to it), so a
// PodCliqueSet stripped of its labels and annotations is still understood; the
// AnnotationCliques annotation is the fallback.
func placements(pcs *grovev1.PodCliqueSet) map[string]placement {
	out := map[string]placement{}
	group := map[string]string{}
	for _, g := range pcs.Spec.Template.PodCliqueScalingGroupConfigs {
		for _, c := range g.CliqueNames {
			group[c] = g.Name
		}
	}
	for _, c := range pcs.Spec.Template.Cliques {
		svc := c.Labels[v1alpha1.LabelService]
		switch g, ok := group[c.Name]; {
		case svc == "":
		case ok:
			out[svc] = placement{Group: g}
		default:
			out[svc] = placement{Clique: c.Name}
		}
	}
	if len(out) == 0 {
		_ = json.Unmarshal([]byte(pcs.Annotations[AnnotationCliques]), &out)
	}
	return out
}

// workerHash is the worker revision of a PodCliqueSet ("" for the stable one): its
// label, else its cliques' (pod template) label.
func workerHash(pcs *grovev1.PodCliqueSet) string {
	if h := pcs.Labels[v1alpha1.LabelWorkerHash]; h != "" {
		return h
	}
	for _, c := range pcs.Spec.Template.Cliques {
		if h := c.Labels[v1alpha1.LabelWorkerHash]; h != "" {
			return h
		}
	}
	return ""
}

// composition lists a PodCliqueSet's cliques and scaling groups: Grove rejects changing
// it on a live object.
func composition(pcs *grovev1.PodCliqueSet) string {
	var parts []string
	for _, c := range pcs.Spec.Template.Cliques {
		parts = append(parts, "c:"+c.Name)
	}
	for _, g := range pcs.Spec.Template.PodCliqueScalingGroupConfigs {
		parts = append(parts, "g:"+g.Name+"="+strings.Join(g.CliqueNames, ","))
	}
	sort.Strings(parts)
	return strings.Join(parts, ";")
}
