// Package v1beta1 is Dynamo's current DynamoGraphDeployment API (nvidia.com/v1beta1,
// Dynamo's storage version since July 2026: DYNAMO-V1BETA1.md) plus the fields this
// operator owns. It is the storage version of our CRD (the hub); v1alpha1 is still
// served (a spoke, deprecated with a warning as Dynamo's is) and converts to and from
// it losslessly (package api/conversion, served at /convert).
//
// # Schema
//
// spec.components[] is Dynamo's v1beta1 component list, field by field: name, type,
// podTemplate (a native PodTemplateSpec whose container "main" the operator fills in),
// replicas, multinode, sharedMemorySize, compilationCache, frontendSidecar,
// scalingAdapter, minAvailable, globalDynamoNamespace, runtimeVersionOverride, and
// Dynamo's features this operator keeps as given without acting on them (modelRef,
// eppConfig, providerOverride, topologyConstraint, experimental): those are open
// objects in both versions, so they convert verbatim and Dynamo's manifests apply,
// but their inner schema is not checked here. spec.env, annotations, labels,
// priorityClassName, backendFramework, restart, topologyConstraint and experimental
// are Dynamo's graph fields. The fields this operator owns (spec.backend,
// spec.rollout, spec.revisionHistoryLimit and the whole status) are the v1alpha1
// types themselves, so they are identical in both versions; the status renames only
// what Dynamo renames (services to components, rollingUpdate.updatedServices to
// updatedComponents).
//
// # Which version the operator works on
//
// The operator works on v1alpha1 internally (render, backends, revisions and the
// controller read v1alpha1 types; ControllerRevisions record v1alpha1 service specs),
// because that is what every part of it was built and tested on, what its history
// records, and what its hashes are defined over: moving every consumer to v1beta1
// would rewrite render and revisions for no behaviour change, and an in-place
// conversion of stored ControllerRevisions. The controller watches and reads v1beta1
// (the storage version, so the API server never calls the conversion webhook for the
// operator's own reads) and converts in-process with the very functions /convert
// serves (conversion.Client, one seam); it writes the status back as v1beta1.
// Owner references keep naming v1alpha1 (as on every workload made before), which the
// controller and the garbage collector match by group and kind.
//
// # Conversion
//
// api/conversion follows Dynamo's rules (DYNAMO-V1BETA1.md §2) and payloads: what the
// target version cannot hold is kept in nvidia.com/dgd-spec as Dynamo's envelope
// {"version":1,"spec":<sparse spec of the source version>}, keyed by component name, and
// a Dynamo-written payload (origin splits of env, envFrom, resources, probes and
// mounts; v1alpha1-only fields) converts as under Dynamo's operator. Our own payloads
// keep a whole service (or component) where one does not convert back bare, restored
// whole while the live object still converts to it, and by Dynamo's rules otherwise
// (the live value wins). One deliberate difference: without a payload, v1beta1's main
// container volume mounts go to extraPodSpec.mainContainer (which this operator
// renders) instead of the flat v1alpha1 volumeMounts (which it keeps as given).
// nvidia.com/dgd-status is kept as given: our status converts whole.
//
// # Hashes
//
// The worker and graph hashes (revisions) are computed over the v1alpha1 the operator
// works on, in a canonical layout (revisions.canonical): the spellings Dynamo's two
// versions allow for one pod (env, envFromSecret, probes, resources in dedicated fields
// or in mainContainer...) hash alike, so rewriting a manifest from v1alpha1 to v1beta1
// starts no rollout; each rule keeps what render builds. Manifests in Dynamo's own
// spelling (every sample and example) are their own canonical form: their hashes, and
// TestHashGolden's literals, are unchanged. A running DGD in another spelling keeps its
// revision across the upgrade (Sync matches stored revisions by canonical content), and
// its next worker revision is hashed canonically.
//
// # Certificates
//
// The manager serves /convert (--webhook-bind-address, default :9443) with a
// certificate from --webhook-cert-mode: self-signed (default; a CA of 10 years and a
// serving certificate of one year for the Service's names, kept in the Secret
// --webhook-secret-name in --webhook-service-namespace ($POD_NAMESPACE), renewed 90 days
// before expiry, re-checked hourly, the CA injected into the CRD's conversion config;
// every replica serves and writes its --webhook-cert-dir), cert-manager (its Secret
// mounted at --webhook-cert-dir, the caBundle injected by cert-manager's CA injector
// through the CRD annotation cert-manager.io/inject-ca-from), or files (ca.crt, tls.crt
// and tls.key in --webhook-cert-dir). --webhook-url registers the conversion by URL
// instead of the Service (make run and the test suites: https://127.0.0.1:<port>).
// The operator also migrates storage once at start (app.MigrateStorage): every DGD
// rewritten as v1beta1, status.storedVersions narrowed to [v1beta1] (only while v1beta1
// is the storage version, and over the CRD as read before the list).
//
// # Admission, compared with Dynamo's
//
// The CRD schema carries Dynamo's v1beta1 rules: components a list keyed by name
// (unique in any letter case, at most one epp, at most 25), type an enum,
// runtimeVersionOverride a version, and Dynamo's transition rules (type and
// minAvailable immutable, restart unset on create). Dynamo's validating webhook also
// refuses, on update, adding or removing components, changing backendFramework or a
// component's single-node/multinode shape, and topology, kvTransferPolicy, GPU memory
// service and failover changes: this operator accepts them, because it rolls such a
// change safely as a new worker revision (or does not act on the field at all).
// Where it accepts less than Dynamo's admission, it refuses only what Dynamo's operator
// cannot deploy either: replicas above 10,000 and nodeCount above 1,024
// (v1alpha1.MaxReplicas, MaxNodeCount), backend Deployment with multinode components,
// Grove's name budget (Dynamo's own rule). Names Dynamo writes whole and the API server
// refuses (a `<namespace>-<dgd>` label value past 63 characters) are shortened here
// instead, so such a DGD deploys. Dynamo's features it keeps as given (modelRef,
// eppConfig, providerOverride, experimental...) are open objects whose inner schema is
// not checked. There is no admission webhook: every rule above is schema or CEL, so
// it needs the operator to be up for nothing but conversion.
// +kubebuilder:object:generate=true
// +groupName=nvidia.com
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "nvidia.com", Version: "v1beta1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
