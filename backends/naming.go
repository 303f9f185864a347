package backends

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// MaxNameLength caps workload names. 52 leaves room for the suffix a ReplicaSet adds
// (`-<pod-template-hash>`, at most 11 characters) within a 63-character label value.
const MaxNameLength = 52

// MaxGangNameLength caps LeaderWorkerSet names, which reach further than a
// Deployment's. LWS v0.9.0 names the leader StatefulSet after the LeaderWorkerSet and
// each group's worker StatefulSet after its leader pod, `<lws>-<group index>`
// (pkg/controllers/pod_controller.go constructWorkerStatefulSetApplyConfiguration:
// appsapplyv1.StatefulSet(leaderPod.Name, ...)); the StatefulSet controller labels
// every pod it makes controller-revision-hash=`<statefulset>-<hash>`
// (k8s.io/kubernetes pkg/controller/history ControllerRevisionName, the hash
// HashControllerRevision's rand.SafeEncodeString of a decimal uint32: at most 10
// characters). So `<lws>-<index>-<hash>` must fit a label value: 63 - 1 - 4 (the
// widest group index, 9999, below v1alpha1.MaxReplicas) - 1 - 10 = 47. Worker pod names
// `<lws>-<index>-<worker index>` (their hostnames, at most 63) fit then too, for every
// nodeCount up to v1alpha1.MaxNodeCount.
const MaxGangNameLength = 47

// WorkloadName is `{dgd}-{service}` for a stable workload and `{dgd}-{service}-{hash}`
// for a worker revision: lower-cased, DNS-safe and at most MaxNameLength characters. A
// name that would be longer keeps its hash suffix and replaces the tail of the rest with
// a short digest of the full name, so distinct inputs stay distinct.
func WorkloadName(dgd, service, hash string) string {
	return capName(sanitize(dgd+"-"+service), hash)
}

// GroupName is `{dgd}-{hash}`, under the same rules as WorkloadName: the name Grove
// PodCliqueSets had before PodCliqueSetName (a revision's `{dgd}-{worker hash}`, a
// stable template's `{dgd}-{stable hash}`). Objects of that name are still found and
// understood; new ones are named by PodCliqueSetName.
func GroupName(dgd, hash string) string {
	return capName(sanitize(dgd), hash)
}

// Name shapes, and why no Service of ours can ever take a name LeaderWorkerSet or
// Grove creates a Service under, for any DGD and service names.
//
// LWS v0.9.0 (subdomainPolicy Shared, which every LeaderWorkerSet of ours sets) creates
// one headless Service named exactly like the LeaderWorkerSet, unless a Service of that
// name exists (pkg/controllers/leaderworkerset_controller.go reconcileHeadlessServices,
// pkg/utils/controller/controller_utils.go CreateHeadlessServiceIfNotExists). Grove
// (operator/v0.1.0-alpha.12-rc1) creates or patches one headless Service per
// PodCliqueSet replica, `<pcs>-<replica>` (api/common/namegen.go
// GenerateHeadlessServiceName; internal/controller/podcliqueset/components/service),
// and ours have one replica: `<pcs>-0`. Every name below is sanitized and capped by
// capName, which keeps its final dash-separated segment whole, so the final segment
// ("last segment") tells the shapes apart:
//
//	LeaderWorkerSet of a worker revision    GangSetName(dgd, svc, hash)   last segment: the worker hash (8 lowercase hex)
//	LeaderWorkerSet of a stable service     GangSetName(dgd, svc, "")     last segment: "lws"
//	Grove's headless Service                <PodCliqueSetName(...)>-0     last segment: "0"
//	our discovery Service of a revision     DiscoveryServiceName(...)     last segment: "discovery"
//	our Service of a cohort's frontend      CohortServiceName(...)        last segment: "cohort"
//
// Five distinct last segments (a hash is hex, and none of "lws", "0", "discovery",
// "cohort" is 8 hex characters), so these five sets of names are pairwise disjoint: no discovery
// Service of ours is ever named like a Service LWS or Grove creates, whatever the DGD
// and service names (digits only, "--" inside, long enough to be capped), and LWS and
// Grove never compete for one Service name either. backends/naming_test.go proves it
// over generated names.
//
// The one Service of ours whose name is not generated is a stable component's
// `{dgd}-{service}` (render.ServiceName), Dynamo's own name that users and Ingresses
// address (GenerateComponentService). A service may be named anything, so that name can
// equal any other: a service named `x-1a2b3c4d` beside a worker `x` whose revision hash
// is 1a2b3c4d, or a service of DGD `a` named `b-0` beside DGD `a-b` on Grove. No naming
// scheme that keeps Dynamo's `{dgd}-{service}` can exclude that, for any generated name
// is `{dgd}-{something}`. The Grove backend picks PodCliqueSet names whose headless
// Service is none of the DGD's own or any cached Service of ours, and whatever is left
// (a name chosen to collide) is never taken silently: the operator reports a Service it
// needs but does not own (controllers, ReasonNameConflict) and touches nothing that runs.

// DiscoverySuffix ends the name of every worker revision's discovery Service.
const DiscoverySuffix = "discovery"

// CohortSuffix ends the name of every cohort's frontend Service.
const CohortSuffix = "cohort"

// CohortServiceName is the Service of a cohort's frontend (a frontend service at one
// worker revision): `{dgd}-{service}-{hash}-cohort`, capped as DiscoveryServiceName
// caps. The traffic provider sends the cohort's share of requests to it; Dynamo's
// discovery reads its EndpointSlices as it reads the frontend's. Its last segment,
// "cohort", is none of the others' below, so it too is never a name LWS or Grove
// creates a Service under.
func CohortServiceName(dgd, service, hash string) string {
	return capName(sanitize(dgd+"-"+service), hash+"-"+CohortSuffix)
}

// StableGangSuffix ends the name of a stable (non-worker) service's LeaderWorkerSet.
const StableGangSuffix = "lws"

// DiscoveryServiceName is the headless Service of a worker revision that Dynamo's
// discovery reads the EndpointSlices of: `{dgd}-{service}-{hash}-discovery`, capped as
// WorkloadName caps (the hash and the suffix are always kept). Nothing addresses it by
// name. It was `{dgd}-{service}-{hash}` before, the name of the revision's
// LeaderWorkerSet and so of the headless Service LWS creates for its gangs' DNS.
func DiscoveryServiceName(dgd, service, hash string) string {
	return capName(sanitize(dgd+"-"+service), hash+"-"+DiscoverySuffix)
}

// GangSetName is the LeaderWorkerSet of (service, hash): WorkloadName's shape for a worker
// revision, and `{dgd}-{service}-lws` for a stable service, whose own Service
// `{dgd}-{service}` LWS's headless Service would otherwise take (Dynamo names its
// LeaderWorkerSets `<component>-0` for the same reason: dynamocomponentdeployment_
// controller.go leaderWorkerSetName).
//
// Capped at MaxGangNameLength, not MaxNameLength: a name of 48 to 52 characters made by
// an operator before that cap is not this name any more (its LeaderWorkerSet's pods
// could never all be created past group 9, or at all from 51 characters).
//
// LWS's validating webhook takes only a DNS-1035 label as a LeaderWorkerSet's name
// (v0.9.0 pkg/webhooks/leaderworkerset_webhook.go ValidateCreate:
// apivalidation.NameIsDNS1035Label), which starts with a letter: a DGD whose name
// starts with a digit gets `lws-` first.
func GangSetName(dgd, service, hash string) string {
	base := sanitize(dgd + "-" + service)
	if base != "" && base[0] >= '0' && base[0] <= '9' {
		base = StableGangSuffix + "-" + base
	}
	if hash == "" {
		return capNameTo(MaxGangNameLength, base, StableGangSuffix)
	}
	return capNameTo(MaxGangNameLength, base, hash)
}

// PodCliqueSetName is candidate k of a DGD's PodCliqueSet names, at most max characters
// long: `{dgd}` for k = 0, `{dgd}-{k}` for the others, and when that is longer than max,
// `{dgd}` cut short so that `-{k}` fits. It reports false when no such name fits (max
// leaves no character of the DGD's name). Which candidate a PodCliqueSet takes is the
// Grove backend's choice (the first free one); its identity is in its labels.
//
// Why this shape: Grove names every pod after its PodCliqueSet, scaling group and
// clique, and refuses a PodCliqueSet whose three names add up to more than 45
// characters (validation/podcliqueset.go validatePodNameConstraints). Dynamo names its
// one PodCliqueSet after the DGD alone, so a DGD deploys on Dynamo's Grove path when
// len(dgd) + len(group) + len(clique) <= 45. Revisions side by side need distinct names
// only among the PodCliqueSets alive at once: the first takes `{dgd}` and costs nothing
// over Dynamo; the next ones cost 2 characters (`-1` ... `-9`, 3 from `-10`), and where
// those do not fit, the DGD's name gives up its last characters instead, so every
// PodCliqueSet of a DGD that Dynamo accepts fits Grove's limit, as long as the limit
// leaves it 3 characters (`x-1`): only a DGD of 1 or 2 characters whose service names
// fill Grove's limit has room for no second one (the Grove backend then reports
// InvalidSpec when a second revision is due). The worked case of
// issue 22: DGD `vg` with the multinode worker VllmPrefillWorker is 2 + 17 + 21 = 40
// characters in slot 0 and 42 in slots 1-9, where `{dgd}-{8-character hash}` made 49.
func PodCliqueSetName(dgd string, k, max int) (string, bool) {
	base := sanitize(dgd)
	if k == 0 {
		return base, base != "" && len(base) <= max
	}
	suffix := "-" + strconv.Itoa(k)
	if len(base)+len(suffix) <= max {
		return base + suffix, base != ""
	}
	keep := max - len(suffix)
	if keep < 1 || keep > len(base) {
		return "", false
	}
	cut := strings.TrimRight(base[:keep], "-")
	return cut + suffix, cut != ""
}

func capName(base, hash string) string { return capNameTo(MaxNameLength, base, hash) }

func capNameTo(max int, base, hash string) string {
	suffix := ""
	if hash != "" {
		suffix = "-" + sanitize(hash)
	}
	if len(base)+len(suffix) <= max {
		return base + suffix
	}
	digest := "-" + shortDigest(base)
	keep := max - len(suffix) - len(digest)
	return strings.TrimRight(base[:keep], "-") + digest + suffix
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

func shortDigest(s string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return fmt.Sprintf("%08x", h.Sum32())[:6]
}

// Labels are the labels of every workload and pod of (service, hash) of the DGD.
func Labels(dgd *v1alpha1.DynamoGraphDeployment, service, hash string) map[string]string {
	l := SelectorLabels(dgd, service, hash)
	l[v1alpha1.LabelManagedBy] = v1alpha1.ManagedByValue
	if s := dgd.Spec.Services[service]; s != nil && s.ComponentType != "" {
		l[v1alpha1.LabelComponentType] = sanitizeLabelValue(s.ComponentType)
	}
	return l
}

// SelectorLabels are the immutable labels that select the pods of one workload.
func SelectorLabels(dgd *v1alpha1.DynamoGraphDeployment, service, hash string) map[string]string {
	l := map[string]string{
		v1alpha1.LabelGraph:   dgd.Name,
		v1alpha1.LabelService: sanitizeLabelValue(service),
	}
	if hash != "" {
		l[v1alpha1.LabelWorkerHash] = hash
	}
	return l
}

func sanitizeLabelValue(s string) string {
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.Trim(s, "-_.")
}
