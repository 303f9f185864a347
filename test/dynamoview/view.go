package dynamoview

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dgd-rollout/operator/render"
)

// Instance is one discovery instance visible to every Dynamo process of its Kubernetes
// namespace: a ready endpoint joined with the DWM its pod published.
type Instance struct {
	// K8sNamespace and PodName name the pod (the DWM's name, the cr_key); PodUID is the
	// endpoint's targetRef uid, equal to the DWM's Pod owner uid.
	K8sNamespace string
	PodName      string
	PodUID       string
	// InstanceID is InstanceID(PodName), the id the daemon emits for the endpoint.
	InstanceID uint64
	// Metadata is the decoded spec.data of the DWM.
	Metadata *DiscoveryMetadata
	// Pod is the pod of that name from the pods passed to Compute, or nil. The join does
	// not use it.
	Pod *corev1.Pod
}

// DynamoNamespaces returns the sorted Dynamo namespaces the instance's records name.
func (in Instance) DynamoNamespaces() []string {
	set := map[string]bool{}
	for _, e := range in.Metadata.Endpoints {
		set[e.Namespace] = true
	}
	for _, m := range in.Metadata.ModelCards {
		set[m.Namespace] = true
	}
	return sortedKeys(set)
}

// View is the discovery state of a set of Kubernetes namespaces, as Dynamo's discovery
// daemon (lib/runtime/src/discovery/kube/daemon.rs) would build it from the given
// EndpointSlices and DWMs. Each Kubernetes namespace is separate: a pod only watches
// its own namespace.
type View struct {
	spaces map[string]*space
}

type space struct {
	instances map[string]Instance // by pod name
	excluded  map[string]string   // pod name -> why it is not visible
	pods      map[string]*corev1.Pod
}

// Compute builds the View. The join (daemon/state.rs, ReadinessIndex and
// JoinTable::reconcile_key), per Kubernetes namespace:
//   - only EndpointSlices labelled nvidia.com/dynamo-discovery-enabled=true are read;
//   - an endpoint contributes (name, uid) only when conditions.ready is true and its
//     targetRef has a non-empty name and uid (extract_endpoint_info);
//   - a name with two different uids across all slices fails closed (invisible);
//   - the instance is visible when a DWM of that name exists whose Pod ownerReference
//     uid equals the endpoint's uid and whose spec.data decodes.
//
// Pods are only attached to instances for diagnostics and CheckIsolation.
func Compute(pods []corev1.Pod, slices []discoveryv1.EndpointSlice, dwms []unstructured.Unstructured) View {
	v := View{spaces: map[string]*space{}}
	get := func(ns string) *space {
		s := v.spaces[ns]
		if s == nil {
			s = &space{instances: map[string]Instance{}, excluded: map[string]string{}, pods: map[string]*corev1.Pod{}}
			v.spaces[ns] = s
		}
		return s
	}
	for i := range pods {
		get(pods[i].Namespace).pods[pods[i].Name] = &pods[i]
	}

	// Readiness index: name -> set of uids reported by ready endpoints (the operator
	// counts a worker ready by the same index: render.ReadyEndpoints).
	ready := map[string]map[string]map[string]bool{}
	notReady := map[string]map[string]bool{}
	byNS := map[string][]discoveryv1.EndpointSlice{}
	enabled := func(l map[string]string) bool { return l[LabelDiscoveryEnabled] == "true" }
	for _, sl := range slices {
		if !enabled(sl.Labels) {
			continue
		}
		ns := sl.Namespace
		get(ns)
		byNS[ns] = append(byNS[ns], sl)
		for _, ep := range sl.Endpoints {
			if ref := ep.TargetRef; ref != nil && ref.Name != "" && ref.UID != "" && (ep.Conditions.Ready == nil || !*ep.Conditions.Ready) {
				if notReady[ns] == nil {
					notReady[ns] = map[string]bool{}
				}
				notReady[ns][ref.Name] = true
			}
		}
	}
	for ns, sls := range byNS {
		for name, uids := range render.ReadyEndpoints(sls, enabled) {
			if ready[ns] == nil {
				ready[ns] = map[string]map[string]bool{}
			}
			ready[ns][name] = map[string]bool{}
			for uid := range uids {
				ready[ns][name][string(uid)] = true
			}
		}
	}

	dwmByName := map[string]map[string]*unstructured.Unstructured{}
	for i := range dwms {
		u := &dwms[i]
		if u.GetKind() != "" && u.GetKind() != DWMKind {
			continue
		}
		ns := u.GetNamespace()
		get(ns)
		if dwmByName[ns] == nil {
			dwmByName[ns] = map[string]*unstructured.Unstructured{}
		}
		dwmByName[ns][u.GetName()] = u
	}

	for ns, s := range v.spaces {
		for name, uids := range ready[ns] {
			if len(uids) != 1 {
				s.excluded[name] = fmt.Sprintf("endpoints report %d different pod uids %v: fail closed", len(uids), sortedKeys(uids))
				continue
			}
			var uid string
			for u := range uids {
				uid = u
			}
			dwm := dwmByName[ns][name]
			if dwm == nil {
				s.excluded[name] = "ready endpoint but no DynamoWorkerMetadata of that name"
				continue
			}
			if owner := PodOwnerUID(dwm); owner != uid {
				s.excluded[name] = fmt.Sprintf("DWM Pod owner uid %q differs from endpoint uid %q", owner, uid)
				continue
			}
			md, err := DecodeMetadata(dwm)
			if err != nil {
				s.excluded[name] = "spec.data does not decode: " + err.Error()
				continue
			}
			s.instances[name] = Instance{
				K8sNamespace: ns, PodName: name, PodUID: uid,
				InstanceID: InstanceID(name), Metadata: md, Pod: s.pods[name],
			}
		}
		for name := range dwmByName[ns] {
			if _, seen := ready[ns][name]; seen {
				continue
			}
			if notReady[ns][name] {
				s.excluded[name] = "endpoint not ready"
			} else {
				s.excluded[name] = "no endpoint in a discovery-enabled EndpointSlice"
			}
		}
	}
	return v
}

// K8sNamespaces returns the sorted Kubernetes namespaces the View knows.
func (v View) K8sNamespaces() []string {
	set := map[string]bool{}
	for ns := range v.spaces {
		set[ns] = true
	}
	return sortedKeys(set)
}

// Instances returns the visible instances of a Kubernetes namespace, sorted by pod name.
func (v View) Instances(k8sNamespace string) []Instance {
	s := v.spaces[k8sNamespace]
	if s == nil {
		return nil
	}
	out := make([]Instance, 0, len(s.instances))
	for _, in := range s.instances {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PodName < out[j].PodName })
	return out
}

// Visible reports whether the pod's instance is visible in its Kubernetes namespace.
func (v View) Visible(k8sNamespace, podName string) bool {
	s := v.spaces[k8sNamespace]
	if s == nil {
		return false
	}
	_, ok := s.instances[podName]
	return ok
}

// Excluded returns, for a Kubernetes namespace, why each pod that has a ready endpoint
// or a DWM is not visible (pod name -> reason).
func (v View) Excluded(k8sNamespace string) map[string]string {
	out := map[string]string{}
	if s := v.spaces[k8sNamespace]; s != nil {
		for k, r := range s.excluded {
			out[k] = r
		}
	}
	return out
}

// Pod returns the pod of that name passed to Compute, or nil.
func (v View) Pod(k8sNamespace, podName string) *corev1.Pod {
	if s := v.spaces[k8sNamespace]; s != nil {
		return s.pods[podName]
	}
	return nil
}

// sortedKeys returns the sorted keys of m, nil when m is empty.
func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
