package revisions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/digest"
	"github.com/dgd-rollout/operator/render"
)

// maxNamePrefixLength caps the DGD-name part of a revision name so that the name, with
// "-" and a hash of at most 10 characters, stays within the 253 characters of a DNS
// subdomain (Kubernetes' ControllerRevisionName uses the same cap).
const maxNamePrefixLength = 223

// RevisionData is the content of a ControllerRevision's .data: everything needed to
// restore the services of a DGD exactly (see Restore). Its JSON reads like a partial DGD
// spec, which is what "kubectl dgd rollout history --revision=N" shows.
type RevisionData struct {
	// Services holds the full spec of every service at the time the revision was made,
	// replicas included (for reference: Restore keeps current replicas). Revisions
	// written before whole-graph revisions (WholeGraph false) hold the worker services
	// only.
	Services map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec `json:"services,omitempty"`
	// Envs are the graph-level spec.envs.
	Envs []corev1.EnvVar `json:"envs,omitempty"`
	// Backend is spec.backend as written (possibly empty).
	Backend v1alpha1.BackendType `json:"backend,omitempty"`
	// BackendFramework is spec.backendFramework.
	BackendFramework string `json:"backendFramework,omitempty"`
	// RenderVersion is the render.RenderVersion the revision was made with (0: before
	// the operator rendered Dynamo's pod contract).
	RenderVersion int `json:"renderVersion,omitempty"`
	// Annotations are the DGD's annotations that reach worker pods
	// (render.PodAnnotationKeys), for reference: Restore does not write metadata.
	Annotations map[string]string `json:"annotations,omitempty"`
	// WholeGraph says that Services holds every service of the graph, stable ones
	// (frontend, planner...) included: a revision records the whole graph template, and
	// Restore brings every service back. Revisions made by operators before it record
	// the worker services only, and restore only those.
	WholeGraph bool `json:"wholeGraph,omitempty"`
	// RestartID is the restart id the services carry in v1alpha1.AnnotationRestartAt
	// (WithRestart), for reference and so that Restore takes it out again; "" when
	// the DGD had none.
	RestartID string `json:"restartID,omitempty"`
}

// NewRevisionData returns the revision data of dgd: every service (with the restart
// annotation, WithRestart), graph envs, backend, framework, the DGD annotations that
// reach worker pods, and the renderer's version. It
// shares pointers with dgd; it is meant to be encoded at once.
func NewRevisionData(dgd *v1alpha1.DynamoGraphDeployment) RevisionData {
	dgd = WithRestart(dgd)
	d := RevisionData{Envs: dgd.Spec.Envs, Backend: dgd.Spec.Backend, BackendFramework: dgd.Spec.BackendFramework,
		RenderVersion: render.RenderVersion, WholeGraph: true, RestartID: dgd.RestartID()}
	for _, k := range render.PodAnnotationKeys() {
		if v, ok := dgd.Annotations[k]; ok {
			if d.Annotations == nil {
				d.Annotations = map[string]string{}
			}
			d.Annotations[k] = v
		}
	}
	for name, svc := range dgd.Spec.Services {
		if svc == nil {
			continue
		}
		if d.Services == nil {
			d.Services = map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{}
		}
		d.Services[name] = svc
	}
	return d
}

// Template returns the worker template the data describes; it equals the
// NewWorkerTemplate of the DGD the data was taken from.
func (d *RevisionData) Template() WorkerTemplate {
	return newWorkerTemplate(d)
}

// Graph returns the graph template the data describes (see GraphTemplate).
func (d *RevisionData) Graph() GraphTemplate {
	g := GraphTemplate{Workers: d.Template(), WorkersOnly: !d.WholeGraph}
	for name, s := range d.Services {
		if s == nil || s.IsWorker() {
			continue
		}
		if g.Stable == nil {
			g.Stable = map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{}
		}
		g.Stable[name] = stableTemplate(s)
	}
	return g
}

// DecodeRevisionData decodes the .data of rev.
func DecodeRevisionData(rev *appsv1.ControllerRevision) (*RevisionData, error) {
	if rev == nil || len(rev.Data.Raw) == 0 {
		return nil, fmt.Errorf("ControllerRevision %s has no data", revKey(rev))
	}
	d := &RevisionData{}
	if err := json.Unmarshal(rev.Data.Raw, d); err != nil {
		return nil, fmt.Errorf("decoding data of ControllerRevision %s: %w", revKey(rev), err)
	}
	return d, nil
}

// RevisionName returns the name of the revision of DGD dgdName with the given hash:
// "<dgdName>-<hash>", the DGD name cut to 223 characters if needed.
func RevisionName(dgdName, hash string) string {
	if len(dgdName) > maxNamePrefixLength {
		dgdName = dgdName[:maxNamePrefixLength]
	}
	return dgdName + "-" + hash
}

// NewRevision returns a ControllerRevision, not yet stored, recording the graph
// template of dgd as revision number revision, named by its graph hash (GraphHash) and
// labelled with its worker hash (Hash), both with collisionCount. Labels: LabelGraph,
// LabelWorkerHash and LabelManagedBy; the DGD's kubernetes.io/change-cause annotation,
// if any, is copied, else a new restart's (NewRestart) is "restart <id>". It sets no owner reference: Interface.Create does.
func NewRevision(dgd *v1alpha1.DynamoGraphDeployment, revision int64, collisionCount *int32) (*appsv1.ControllerRevision, error) {
	data := NewRevisionData(dgd)
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("encoding revision data of DynamoGraphDeployment %s/%s: %w",
			dgd.Namespace, dgd.Name, err)
	}
	hash := Hash(data.Template(), collisionCount)
	rev := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: dgd.Namespace,
			Name:      RevisionName(dgd.Name, GraphHash(data.Graph(), collisionCount)),
			Labels: map[string]string{
				v1alpha1.LabelGraph:      dgd.Name,
				v1alpha1.LabelWorkerHash: hash,
				v1alpha1.LabelManagedBy:  v1alpha1.ManagedByValue,
			},
		},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: revision,
	}
	if cause, ok := dgd.Annotations[v1alpha1.AnnotationChangeCause]; ok {
		rev.Annotations = map[string]string{v1alpha1.AnnotationChangeCause: cause}
	} else if id := NewRestart(dgd); id != "" {
		rev.Annotations = map[string]string{v1alpha1.AnnotationChangeCause: "restart " + id}
	}
	return rev, nil
}

// templateJSON returns the canonical JSON of the graph template rev records.
func templateJSON(rev *appsv1.ControllerRevision) ([]byte, error) {
	d, err := DecodeRevisionData(rev)
	if err != nil {
		return nil, err
	}
	return digest.Canonical(d.Graph())
}

// Equal reports whether a and b record the same graph template: their .data decode to
// graph templates with the same canonical JSON. Fields of .data the hashes ignore
// (replicas, autoscaling...) do not count, so a revision made before a scale-up equals
// one made after it. A revision recording the workers only (made before whole-graph
// revisions) equals no whole-graph one. Revisions whose data cannot be decoded are
// equal to nothing.
func Equal(a, b *appsv1.ControllerRevision) bool {
	ja, err := templateJSON(a)
	if err != nil {
		return false
	}
	jb, err := templateJSON(b)
	return err == nil && bytes.Equal(ja, jb)
}

// FindEqual returns the revisions of revs that are Equal to target, in the order of revs.
func FindEqual(revs []*appsv1.ControllerRevision, target *appsv1.ControllerRevision) []*appsv1.ControllerRevision {
	want, err := templateJSON(target)
	if err != nil {
		return nil
	}
	var out []*appsv1.ControllerRevision
	for _, rev := range revs {
		if got, err := templateJSON(rev); err == nil && bytes.Equal(got, want) {
			out = append(out, rev)
		}
	}
	return out
}

// NextRevision returns the number for a new newest revision: the largest .revision in
// revs plus one, or 1 if revs is empty.
func NextRevision(revs []*appsv1.ControllerRevision) int64 {
	var maxRev int64
	for _, rev := range revs {
		maxRev = max(maxRev, rev.Revision)
	}
	return maxRev + 1
}

// HashOf returns the worker hash of rev, from its LabelWorkerHash label; for a revision
// without the label it falls back to the name's suffix after "<LabelGraph value>-" (a
// revision made before whole-graph revisions was named by its worker hash), and returns
// "" if that fails too.
func HashOf(rev *appsv1.ControllerRevision) string {
	if rev == nil {
		return ""
	}
	if h := rev.Labels[v1alpha1.LabelWorkerHash]; h != "" {
		return h
	}
	if graph := rev.Labels[v1alpha1.LabelGraph]; graph != "" {
		prefix := RevisionName(graph, "")
		if h, ok := strings.CutPrefix(rev.Name, prefix); ok {
			return h
		}
	}
	return ""
}

// Ref is a revision's one identity, the value every part of the operator names a
// revision by: its number (.revision: newer is higher, what the planner orders pools
// by and kubectl dgd shows), its ControllerRevision's name (status.updateRevision and
// status.currentRevision), the hash of its workers (the suffix of their workloads and
// Dynamo namespace, the nvidia.com/dynamo-worker-hash label of their pods,
// status.updateWorkerHash) and the hash of its whole graph (the suffix of its name).
// Revisions that change only stable services share a WorkerHash and differ in the
// rest. The zero Ref names no revision.
type Ref struct {
	Number     int64
	Name       string
	WorkerHash string
	GraphHash  string
}

// RefOf is rev's Ref (the zero Ref for nil). GraphHash is the suffix of its name (a
// revision made before whole-graph revisions was named by its worker hash, which is
// then its graph hash too).
func RefOf(rev *appsv1.ControllerRevision) Ref {
	if rev == nil {
		return Ref{}
	}
	return Ref{Number: rev.Revision, Name: rev.Name, WorkerHash: HashOf(rev), GraphHash: rev.Name[strings.LastIndex(rev.Name, "-")+1:]}
}

// IsZero reports whether r names no revision.
func (r Ref) IsZero() bool { return r == Ref{} }

// SortByRevision sorts revs in place by ascending .revision, ties broken by name.
func SortByRevision(revs []*appsv1.ControllerRevision) {
	sort.SliceStable(revs, func(i, j int) bool {
		if revs[i].Revision != revs[j].Revision {
			return revs[i].Revision < revs[j].Revision
		}
		return revs[i].Name < revs[j].Name
	})
}

// revKey returns "namespace/name" of rev for error messages.
func revKey(rev *appsv1.ControllerRevision) string {
	if rev == nil {
		return "<nil>"
	}
	return rev.Namespace + "/" + rev.Name
}
