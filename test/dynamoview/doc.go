// Package dynamoview computes, from plain Kubernetes objects, what the NVIDIA Dynamo
// runtime inside each pod would publish and what each Dynamo frontend would discover.
//
// KWOK never runs containers, so tests cannot ask a real frontend which workers it routes
// to. This package replays Dynamo's Kubernetes discovery (DYN_DISCOVERY_BACKEND=kubernetes)
// instead:
//
//   - RuntimeOf reads a pod's main container (command, args, env) and derives what the
//     Dynamo runtime in it registers: the effective Dynamo namespace, component, endpoint,
//     worker type and model name; Metadata renders the DynamoWorkerMetadata (DWM) object
//     it would server-side-apply.
//   - Compute joins EndpointSlices with DWMs exactly as Dynamo's discovery daemon does
//     (lib/runtime/src/discovery/kube/daemon.rs and daemon/state.rs): an instance is
//     visible only when a ready endpoint and a DWM owned by the same pod uid meet.
//   - View.Frontend applies a frontend's namespace filter (lib/llm/src/namespace.rs,
//     matches_with_prefix_mode), groups model cards into generations (Dynamo namespaces)
//     and evaluates per-generation readiness (lib/llm/src/discovery/readiness.rs).
//   - CheckIsolation and Frontends are checks and helpers for tests; Publish is the one
//     function that talks to an API server: it creates the DWMs the runtimes would write.
//
// The rules are taken from /work/notes/dynamo-discovery.md, /work/notes/dynamo-render.md
// and /work/notes/dynamo-multinode.md, which cite the ai-dynamo/dynamo source files named
// in the comments of this package.
package dynamoview

// Label keys read by this package.
const (
	// LabelDiscoveryEnabled marks EndpointSlices (inherited from their Service) that the
	// discovery daemon watches. Dynamo's watcher sets two label selectors, but kube-rs
	// `watcher::Config::labels` replaces the selector, so only this one is enforced
	// (lib/runtime/src/discovery/kube/daemon.rs, DiscoverySource::new).
	LabelDiscoveryEnabled = "nvidia.com/dynamo-discovery-enabled"
	// LabelDiscoveryBackend is the second discovery label the operator sets; it is not
	// enforced by the daemon and is not read by Compute.
	LabelDiscoveryBackend = "nvidia.com/dynamo-discovery-backend"
	// LabelWorkerHash carries a worker pod's generation (revision) hash; the operator
	// also passes it as DYN_NAMESPACE_WORKER_SUFFIX.
	LabelWorkerHash = "nvidia.com/dynamo-worker-hash"
)

// DWM coordinates (lib/runtime/src/discovery/kube/crd.rs, #[kube(...)] on
// DynamoWorkerMetadataSpec).
const (
	// DWMGroup is the API group of DynamoWorkerMetadata.
	DWMGroup = "nvidia.com"
	// DWMVersion is the API version of DynamoWorkerMetadata.
	DWMVersion = "v1alpha1"
	// DWMKind is the kind of the discovery metadata object each runtime pod writes.
	DWMKind = "DynamoWorkerMetadata"
	// DWMAPIVersion is DWMGroup/DWMVersion.
	DWMAPIVersion = DWMGroup + "/" + DWMVersion
)

// GlobalNamespace is Dynamo's default and global namespace ("dynamo"): the default of
// DYN_NAMESPACE and, as a frontend prefix or namespace, the filter that matches all.
const GlobalNamespace = "dynamo"
