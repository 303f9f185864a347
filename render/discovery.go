package render

import (
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// What Dynamo's Kubernetes discovery makes of EndpointSlices (DYN_DISCOVERY_BACKEND=
// kubernetes). Every Dynamo pod runs a discovery daemon that watches the EndpointSlices
// of its namespace carrying the discovery labels and joins their ready endpoints with
// the DynamoWorkerMetadata objects the runtimes publish
// (lib/runtime/src/discovery/kube/daemon.rs, daemon/state.rs ReadinessIndex,
// extract_endpoint_info); a frontend then admits the worker namespaces its prefix filter
// accepts (lib/llm/src/namespace.rs, matches_with_prefix_mode). The operator cannot see
// what a runtime publishes, but it can see the half of the join the cluster makes: a
// worker it counts as ready must be a ready endpoint there, or no frontend routes to
// it. test/dynamoview replays the whole join with the same functions.

// DiscoveryLabelled reports whether an EndpointSlice (its Service's labels, which the
// EndpointSlice controller copies) carries both discovery labels the operator and
// Dynamo's operator set on every discovery Service.
func DiscoveryLabelled(labels map[string]string) bool {
	return labels[LabelDiscoveryEnabled] == discoveryEnabledValue && labels[LabelDiscoveryBackend] == DiscoveryKubernetes
}

// ReadyEndpoints is the discovery daemon's readiness index over the slices match
// accepts: for every pod name with a ready endpoint (conditions.ready true, a targetRef
// with a name and a uid), the uids those endpoints name. Dynamo admits a name only with
// exactly one uid (two fail closed: a pod recreated under its name while a slice still
// lists the old one); the caller checks that.
func ReadyEndpoints(slices []discoveryv1.EndpointSlice, match func(labels map[string]string) bool) map[string]map[types.UID]bool {
	out := map[string]map[types.UID]bool{}
	for i := range slices {
		if !match(slices[i].Labels) {
			continue
		}
		for _, ep := range slices[i].Endpoints {
			ref := ep.TargetRef
			if ref == nil || ref.Name == "" || ref.UID == "" || ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
				continue
			}
			if out[ref.Name] == nil {
				out[ref.Name] = map[types.UID]bool{}
			}
			out[ref.Name][ref.UID] = true
		}
	}
	return out
}

// AcceptsNamespace is a frontend's namespace filter with prefix DYN_NAMESPACE_PREFIX
// (matches_with_prefix_mode for a Prefix filter): prefix itself, or `prefix-<suffix>`;
// strict (DYN_NAMESPACE_PREFIX_STRICT, set for runtimes >= 1.6.0) takes only a suffix
// of exactly 8 lowercase hex characters, or `legacy`. The strict filter accepts a
// subset of what the loose one does.
func AcceptsNamespace(prefix, ns string, strict bool) bool {
	if ns == prefix {
		return true
	}
	rest, ok := strings.CutPrefix(ns, prefix)
	if !ok {
		return false
	}
	if !strict {
		return strings.HasSuffix(prefix, "-") || strings.HasPrefix(rest, "-")
	}
	suffix, ok := strings.CutPrefix(rest, "-")
	if !ok {
		return false
	}
	if suffix == "legacy" {
		return true
	}
	if len(suffix) != 8 {
		return false
	}
	for _, c := range []byte(suffix) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
