package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strconv"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/invariants"
)

// history keeps every version of the workload objects and DGDs a Watcher saw, by
// resourceVersion, so that the state of the live objects at the moment of any write
// (a status write: the end of a pass) can be read back once every event up to it has
// arrived. Resource versions of one API server compare as numbers (etcd revisions,
// KEP-5504), across kinds; an informer delivers each object's versions in order, not
// the versions of different objects, hence Flush before judging a moment.
//
// Workloads are read by kind, independently of the operator's backends:
//   - Deployment, LeaderWorkerSet: spec.replicas, the worker-hash and service labels;
//   - Grove: each worker PodCliqueSet (its worker-hash label) holds one workload per
//     service its template's cliques are labelled with: the PodClique `<pcs>-0-<clique>`
//     of a standalone clique or the PodCliqueScalingGroup `<pcs>-0-<group>` of a scaling
//     group, at its spec.replicas, or while Grove has not made it yet at the template's
//     count (what the operator set: Grove creates the object from the template).
//
// An object being deleted holds no replicas.
type history struct {
	objs map[objKey][]version
	dgds []dgdVersion
	// dgdGone: the DGD was deleted, at resourceVersion goneAt (its workloads go with it,
	// in the garbage collector's order: no state after is judged).
	dgdGone bool
	goneAt  uint64
}

type objKey struct{ kind, name string }

// version is what the checks need of one version of a workload object.
type version struct {
	rv       uint64
	gone     bool // the object was deleted
	uid      types.UID
	owner    types.UID // controller
	deleting bool
	hash     string // worker hash label ("" for a stable workload)
	service  string
	replicas int32
	ready    int32 // ready replicas as the object reports them
	// Grove PodCliqueSets: the clique or scaling group of each service and the
	// template's replica count of each.
	places map[string]string // service -> object name suffix (clique or group)
	tmpl   map[string]int32
}

type dgdVersion struct {
	rv uint64
	d  *v1alpha1.DynamoGraphDeployment
}

// liveWorkload is one worker workload at some moment.
type liveWorkload struct {
	invariants.Workload
	kind, name string
}

func newHistory() *history { return &history{objs: map[objKey][]version{}} }

// parseRV reads a resourceVersion (0 when it is not a number).
func parseRV(rv string) uint64 {
	n, _ := strconv.ParseUint(rv, 10, 64)
	return n
}

// record adds one version of obj (gone: its deletion) and reports whether it is a DGD
// status write (a version of the DGD whose status differs from the one before).
func (h *history) record(obj client.Object, gone bool) (statusWrite bool) {
	rv := parseRV(obj.GetResourceVersion())
	if d, ok := obj.(*v1alpha1.DynamoGraphDeployment); ok {
		if gone {
			h.dgdGone, h.goneAt = true, rv
			if last := h.latestDGD(); last != nil && parseRV(last.ResourceVersion) >= rv {
				h.goneAt = parseRV(last.ResourceVersion) + 1 // a deletion seen on a relist
			}
			return false
		}
		prev := h.latestDGD()
		h.dgds = append(h.dgds, dgdVersion{rv: rv, d: d.DeepCopy()})
		return prev == nil && len(d.Status.Services) > 0 || prev != nil && !equality.Semantic.DeepEqual(prev.Status, d.Status)
	}
	v := version{rv: rv, gone: gone, uid: obj.GetUID(), deleting: !obj.GetDeletionTimestamp().IsZero(),
		hash: obj.GetLabels()[v1alpha1.LabelWorkerHash], service: obj.GetLabels()[v1alpha1.LabelService]}
	if ref := metav1.GetControllerOf(obj); ref != nil {
		v.owner = ref.UID
	}
	kind := ""
	switch o := obj.(type) {
	case *appsv1.Deployment:
		kind, v.replicas, v.ready = "Deployment", ptr.Deref(o.Spec.Replicas, 1), o.Status.AvailableReplicas
	case *lwsv1.LeaderWorkerSet:
		kind, v.replicas, v.ready = "LeaderWorkerSet", ptr.Deref(o.Spec.Replicas, 1), o.Status.ReadyReplicas
	case *grovev1.PodClique:
		kind, v.replicas, v.ready = "PodClique", o.Spec.Replicas, o.Status.ReadyReplicas
	case *grovev1.PodCliqueScalingGroup:
		kind, v.replicas, v.ready = "PodCliqueScalingGroup", o.Spec.Replicas, o.Status.AvailableReplicas
	case *grovev1.PodCliqueSet:
		kind = "PodCliqueSet"
		v.places, v.tmpl = groveWorkloads(o)
	default:
		return false
	}
	k := objKey{kind, obj.GetName()}
	h.objs[k] = append(h.objs[k], v)
	return false
}

// groveWorkloads maps each service of a PodCliqueSet's template to the clique or
// scaling group holding it (read from the cliques' service labels, as Grove copies
// them) and to the template's replica count.
func groveWorkloads(pcs *grovev1.PodCliqueSet) (map[string]string, map[string]int32) {
	group, groupReplicas := map[string]string{}, map[string]int32{}
	for _, g := range pcs.Spec.Template.PodCliqueScalingGroupConfigs {
		for _, c := range g.CliqueNames {
			group[c] = g.Name
		}
		groupReplicas[g.Name] = ptr.Deref(g.Replicas, 1)
	}
	places, tmpl := map[string]string{}, map[string]int32{}
	for _, c := range pcs.Spec.Template.Cliques {
		svc := c.Labels[v1alpha1.LabelService]
		if svc == "" {
			continue
		}
		if g, ok := group[c.Name]; ok {
			places[svc], tmpl[svc] = g, groupReplicas[g]
		} else {
			places[svc], tmpl[svc] = c.Name, c.Spec.Replicas
		}
	}
	return places, tmpl
}

func (h *history) latestDGD() *v1alpha1.DynamoGraphDeployment {
	if len(h.dgds) == 0 {
		return nil
	}
	return h.dgds[len(h.dgds)-1].d
}

// dgdAt is the DGD as of rv (nil before it existed and once deleted).
func (h *history) dgdAt(rv uint64) *v1alpha1.DynamoGraphDeployment {
	if h.dgdGone && rv >= h.goneAt {
		return nil
	}
	var out *v1alpha1.DynamoGraphDeployment
	for _, v := range h.dgds {
		if v.rv <= rv {
			out = v.d
		}
	}
	return out
}

// specOf is the DGD whose spec a status was written for: the latest version at or
// before rv whose generation is the status's observedGeneration (a spec written during
// the pass is not what the pass planned from).
func (h *history) specOf(rv uint64) *v1alpha1.DynamoGraphDeployment {
	st := h.dgdAt(rv)
	if st == nil {
		return nil
	}
	out := st
	for _, v := range h.dgds {
		if v.rv <= rv && v.d.Generation == st.Status.ObservedGeneration {
			out = v.d
		}
	}
	return out
}

// at is the version of every object as of rv (math.MaxUint64: the latest), without
// the objects deleted by then.
func (h *history) at(rv uint64) map[objKey]version {
	out := map[objKey]version{}
	for k, vs := range h.objs {
		for i := len(vs) - 1; i >= 0; i-- {
			if vs[i].rv <= rv {
				if !vs[i].gone {
					out[k] = vs[i]
				}
				break
			}
		}
	}
	return out
}

// workers are the worker workloads of the DGD of UID owner live as of rv, by kind (see
// history), sorted by kind and name.
func (h *history) workers(rv uint64, owner types.UID) []liveWorkload {
	objs := h.at(rv)
	var out []liveWorkload
	for k, v := range objs {
		if v.owner != owner {
			continue
		}
		switch k.kind {
		case "Deployment", "LeaderWorkerSet":
			if v.hash != "" && !v.deleting {
				out = append(out, liveWorkload{invariants.Workload{Service: v.service, Hash: v.hash, Spec: v.replicas, Ready: min(v.ready, v.replicas)}, k.kind, k.name})
			}
		case "PodCliqueSet":
			if v.hash == "" || v.deleting {
				continue
			}
			for svc, place := range v.places {
				w := liveWorkload{invariants.Workload{Service: svc, Hash: v.hash, Spec: v.tmpl[svc]}, "", k.name + "-0-" + place}
				for _, kind := range []string{"PodClique", "PodCliqueScalingGroup"} {
					if o, ok := objs[objKey{kind, w.name}]; ok && o.owner == v.uid && !o.deleting {
						w.kind, w.Spec, w.Ready = kind, o.replicas, min(o.ready, o.replicas)
					}
				}
				out = append(out, w)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].kind+"/"+out[i].name < out[j].kind+"/"+out[j].name })
	return out
}

// writes are the resourceVersions of the workload objects' versions after rv, in order.
func (h *history) writes(after uint64) []uint64 {
	var out []uint64
	for _, vs := range h.objs {
		for _, v := range vs {
			if v.rv > after {
				out = append(out, v.rv)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// statusWrites are the resourceVersions of the DGD's status writes after rv, in order.
func (h *history) statusWrites(after uint64) []uint64 {
	var out []uint64
	for i, v := range h.dgds {
		if v.rv <= after {
			continue
		}
		if i == 0 && len(v.d.Status.Services) > 0 || i > 0 && !equality.Semantic.DeepEqual(h.dgds[i-1].d.Status, v.d.Status) {
			out = append(out, v.rv)
		}
	}
	return out
}

// changes lists what happened to the replicas set (spec) and ready counts of the
// worker workloads of the DGD of UID owner between two moments (after from, up to to),
// version by version: a scale up and back again is two moves.
func (h *history) changes(from, to uint64, owner types.UID) (spec, ready []string) {
	workerSets := map[types.UID]bool{} // the DGD's worker PodCliqueSets
	for k, vs := range h.objs {
		for _, v := range vs {
			if k.kind == "PodCliqueSet" && v.owner == owner && v.hash != "" {
				workerSets[v.uid] = true
			}
		}
	}
	for k, vs := range h.objs {
		for _, v := range vs {
			if v.rv <= from || v.rv > to {
				continue
			}
			switch k.kind {
			case "Deployment", "LeaderWorkerSet":
				if v.owner != owner || v.hash == "" {
					continue
				}
			case "PodClique", "PodCliqueScalingGroup":
				if !workerSets[v.owner] {
					continue
				}
			default:
				continue
			}
			prev, ok := h.versionBefore(k, v.rv)
			switch {
			case !ok && !v.gone:
				spec = append(spec, fmt.Sprintf("%s %s created at %d (resourceVersion %d)", k.kind, k.name, v.replicas, v.rv))
			case ok && v.gone:
				spec = append(spec, fmt.Sprintf("%s %s deleted (resourceVersion %d)", k.kind, k.name, v.rv))
			case ok && prev.replicas != v.replicas:
				spec = append(spec, fmt.Sprintf("%s %s scaled %d→%d (resourceVersion %d)", k.kind, k.name, prev.replicas, v.replicas, v.rv))
			case ok && prev.ready != v.ready:
				ready = append(ready, fmt.Sprintf("%s %s ready %d→%d (resourceVersion %d)", k.kind, k.name, prev.ready, v.ready, v.rv))
			}
		}
	}
	sort.Strings(spec)
	sort.Strings(ready)
	return spec, ready
}

// versionBefore is the latest version of k before rv that is not a deletion.
func (h *history) versionBefore(k objKey, rv uint64) (version, bool) {
	var out version
	ok := false
	for _, v := range h.objs[k] {
		if v.rv < rv {
			out, ok = v, !v.gone
		}
	}
	return out, ok
}

// newest is the resourceVersion of the latest version of k (its deletion included), 0
// when none was seen.
func (h *history) newest(k objKey) uint64 {
	if vs := h.objs[k]; len(vs) > 0 {
		return vs[len(vs)-1].rv
	}
	return 0
}

// latest maps every object (kind/name) the history holds to the resourceVersion of its
// latest version, without the deleted ones.
func (h *history) latest() map[objKey]uint64 {
	out := map[objKey]uint64{}
	for k, vs := range h.objs {
		if v := vs[len(vs)-1]; !v.gone {
			out[k] = v.rv
		}
	}
	if d := h.latestDGD(); d != nil && !h.dgdGone {
		out[objKey{"DynamoGraphDeployment", d.Name}] = parseRV(d.ResourceVersion)
	}
	return out
}
