package grove

import (
	"encoding/json"
	"sort"
	"strings"
	"time"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/digest"
	renderpkg "github.com/dgd-rollout/operator/render"
)

// AnnotationCliques records, on a PodCliqueSet, which clique or scaling group holds each
// service: Grove names are short and DNS-safe, service names need not be.
const AnnotationCliques = "nvidia.com/dgd-cliques"

// NotOurs reports whether a PodCliqueSet (its metadata) whose controller is a DGD was
// made by another controller than this backend: it lacks AnnotationCliques, which every
// PodCliqueSet of this backend has carried since its first version. Dynamo's own
// operator makes one PodCliqueSet per DGD, named after it (this backend's first choice
// of a stable PodCliqueSet's name too), controlled by the DGD and carrying only the DGD
// spec's labels and annotations (ai-dynamo/dynamo deploy/operator/internal/dynamo/graph.go
// GenerateGrovePodCliqueSet; internal/controller/dgd_grove_workloads_reconciler.go
// reconcilePodCliqueSet, SyncObservedResource with the DGD as owner). Labelled as ours
// (backends.RelabelOwned at start), it would enter the cache and be observed as one of
// this backend's PodCliqueSets.
func NotOurs(gvk schema.GroupVersionKind, o metav1.Object) bool {
	if gvk.Group != grovev1.SchemeGroupVersion.Group || gvk.Kind != "PodCliqueSet" {
		return false
	}
	_, ours := o.GetAnnotations()[AnnotationCliques]
	return !ours
}

// LabelStableHash is the hash of a stable service's rendered template, on the
// PodCliqueSet that runs that template (absent on worker revisions' PodCliqueSets).
const LabelStableHash = "nvidia.com/dgd-stable-hash"

// TerminationDelay is set explicitly (Grove's default): a clique below its minAvailable
// for this long has its PodCliqueSet replica gang-terminated.
const TerminationDelay = 4 * time.Hour

// Leader and worker clique suffixes of a multinode service's scaling group, as Dynamo
// names them (`<service>-ldr`, `<service>-wkr`), so Dynamo's leader address
// `$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-<service>-ldr-0.$(GROVE_HEADLESS_SERVICE)`
// holds on our PodCliqueSets too.
const (
	LeaderSuffix = "-ldr"
	WorkerSuffix = "-wkr"
)

// placement says where a service lives inside a PodCliqueSet.
type placement struct {
	// Clique is the standalone clique of a single-node service.
	Clique string `json:"clique,omitempty"`
	// Group is the scaling group of a multinode service; its cliques are
	// Group+LeaderSuffix (1 pod) and Group+WorkerSuffix (nodeCount-1 pods).
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
	return strings.TrimRight(s[:max-5], "-") + "-" + digest.Of(service)[:4]
}

// placementOf names a service's clique or scaling group after the service, lower-cased
// and never truncated, as Dynamo names them (expandMultinodeRoles): Dynamo's leader
// address `...-<service>-ldr-0...` depends on it. Names too long for Grove are rejected
// before anything is created (Backend.Validate).
func placementOf(svc *v1alpha1.DynamoComponentDeploymentSharedSpec, service string) placement {
	if svc.IsMultinode() {
		return placement{Group: shortName(service, 63)}
	}
	return placement{Clique: shortName(service, 63)}
}

// render builds PodCliqueSet name holding one worker revision: every service of the
// pool, replicas 1; every field Grove's defaulting webhook would set is set.
func render(dgd *v1alpha1.DynamoGraphDeployment, pool backends.Pool, name string, cfg renderpkg.Config) (*grovev1.PodCliqueSet, error) {
	tmpl, places, err := renderTemplate(dgd, pool.Services, name, cfg)
	if err != nil {
		return nil, err
	}
	return newPodCliqueSet(dgd, name, pcsLabels(dgd, pool.Hash), tmpl, places), nil
}

// stableTemplate is a stable service's template as its stable hash covers it (rendered
// for no PodCliqueSet name: a template's identity must not depend on the name it gets),
// its placement and that hash. A template change is a new PodCliqueSet beside the old
// one (see Backend.StableSideBySide).
func stableTemplate(dgd *v1alpha1.DynamoGraphDeployment, sw backends.ServiceWorkload, cfg renderpkg.Config) (map[string]placement, string, error) {
	tmpl, places, err := renderTemplate(dgd, []backends.ServiceWorkload{sw}, "", cfg)
	if err != nil {
		return nil, "", err
	}
	return places, stableHash(tmpl), nil
}

// renderStable builds PodCliqueSet name holding one stable service's template,
// labelled with the service and the template's stable hash.
func renderStable(dgd *v1alpha1.DynamoGraphDeployment, sw backends.ServiceWorkload, name string, cfg renderpkg.Config) (*grovev1.PodCliqueSet, error) {
	_, h, err := stableTemplate(dgd, sw, cfg)
	if err != nil {
		return nil, err
	}
	tmpl, places, err := renderTemplate(dgd, []backends.ServiceWorkload{sw}, name, cfg)
	if err != nil {
		return nil, err
	}
	labels := pcsLabels(dgd, "")
	labels[v1alpha1.LabelService] = backends.Labels(dgd, sw.Service, "")[v1alpha1.LabelService]
	labels[LabelStableHash] = h
	return newPodCliqueSet(dgd, name, labels, tmpl, places), nil
}

func newPodCliqueSet(dgd *v1alpha1.DynamoGraphDeployment, name string, labels map[string]string,
	tmpl grovev1.PodCliqueSetTemplateSpec, places map[string]placement) *grovev1.PodCliqueSet {
	raw, _ := json.Marshal(places)
	return &grovev1.PodCliqueSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: dgd.Namespace, Labels: labels,
			Annotations: map[string]string{AnnotationCliques: string(raw)},
		},
		Spec: grovev1.PodCliqueSetSpec{
			Replicas:       1,
			UpdateStrategy: &grovev1.PodCliqueSetUpdateStrategy{Type: grovev1.RollingRecreateStrategy},
			Template:       tmpl,
		},
	}
}

// renderTemplate renders the cliques and scaling groups of services, sorted by name,
// for PodCliqueSet pcs: a single-node service is one clique of its pods, a multinode
// one a scaling group of its leader and worker cliques, each pod rendered for its role
// in a Grove gang. A TRT-LLM leader starts after its workers (its mpirun needs their
// sshd), as Dynamo orders it.
func renderTemplate(dgd *v1alpha1.DynamoGraphDeployment, services []backends.ServiceWorkload, pcs string, cfg renderpkg.Config) (grovev1.PodCliqueSetTemplateSpec, map[string]placement, error) {
	tmpl := grovev1.PodCliqueSetTemplateSpec{
		StartupType:           ptr.To(grovev1.CliqueStartupTypeAnyOrder),
		TerminationDelay:      &metav1.Duration{Duration: TerminationDelay},
		HeadlessServiceConfig: &grovev1.HeadlessServiceConfig{PublishNotReadyAddresses: true},
	}
	places := map[string]placement{}
	sorted := append([]backends.ServiceWorkload(nil), services...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Service < sorted[j].Service })
	for _, sw := range sorted {
		comp := backends.Component(dgd, sw, cfg)
		pl := placementOf(sw.Spec, sw.Service)
		places[sw.Service] = pl
		if pl.Clique != "" {
			pod, err := comp.Pod(renderpkg.RoleMain, nil)
			if err != nil {
				return tmpl, nil, err
			}
			// minAvailable 1: a planned scale-down to any count >= 1 never crosses it.
			tmpl.Cliques = append(tmpl.Cliques, clique(pl.Clique, pod, max(sw.Replicas, 1), 1))
			continue
		}
		gang := renderpkg.Grove{PCS: pcs, Group: pl.Group, Namespace: dgd.Namespace}
		leader, err := comp.Pod(renderpkg.RoleLeader, gang)
		if err != nil {
			return tmpl, nil, err
		}
		worker, err := comp.Pod(renderpkg.RoleWorker, gang)
		if err != nil {
			return tmpl, nil, err
		}
		n := sw.Spec.NodeCount()
		ldr, wkr := clique(pl.Group+LeaderSuffix, leader, 1, 1), clique(pl.Group+WorkerSuffix, worker, n-1, n-1)
		if f, _ := renderpkg.DetectFramework(&leader.Spec.Containers[0], dgd.Spec.BackendFramework); f == renderpkg.FrameworkTRTLLM {
			ldr.Spec.StartsAfter = []string{wkr.Name}
			tmpl.StartupType = ptr.To(grovev1.CliqueStartupTypeExplicit)
		}
		tmpl.Cliques = append(tmpl.Cliques, ldr, wkr)
		tmpl.PodCliqueScalingGroupConfigs = append(tmpl.PodCliqueScalingGroupConfigs, grovev1.PodCliqueScalingGroupConfig{
			Name: pl.Group, CliqueNames: []string{pl.Group + LeaderSuffix, pl.Group + WorkerSuffix},
			Replicas: ptr.To(max(sw.Replicas, 1)), MinAvailable: ptr.To[int32](1),
		})
	}
	return tmpl, places, nil
}

// stableHash is the digest of a template with its replica counts cleared: scaling a
// stable service is not a new template. (The digest of a template is the SHA-256 of its
// JSON as it always was: TestStableHashGolden pins one.)
func stableHash(tmpl grovev1.PodCliqueSetTemplateSpec) string {
	t := tmpl.DeepCopy()
	for _, c := range t.Cliques {
		c.Spec.Replicas = 0
	}
	for i := range t.PodCliqueScalingGroupConfigs {
		t.PodCliqueScalingGroupConfigs[i].Replicas = nil
	}
	return digest.Of(t)
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
// stable ones) and managed-by.
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

// workerHash is the worker revision of a PodCliqueSet ("" for a stable one): its
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

// pcsStableHash is the stable template hash a stable PodCliqueSet runs: its label, else
// (a PodCliqueSet stripped of its labels) the suffix of its name when it was named
// `{dgd}-{stable hash}` (backends.GroupName, before PodCliqueSetName). A PodCliqueSet made before
// stable services had one each (named `{dgd}`, holding every stable service) has none:
// it is outdated whatever it runs.
func pcsStableHash(dgd *v1alpha1.DynamoGraphDeployment, pcs *grovev1.PodCliqueSet) string {
	if h := pcs.Labels[LabelStableHash]; h != "" {
		return h
	}
	if len(placements(pcs)) != 1 {
		return ""
	}
	h := pcs.Name[strings.LastIndex(pcs.Name, "-")+1:]
	if len(h) != 8 || pcs.Name != backends.GroupName(dgd.Name, h) {
		return "" // a name from PodCliqueSetName says nothing of the template
	}
	return h
}
