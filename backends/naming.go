package backends

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// MaxNameLength caps workload names. 52 leaves room for the suffixes that StatefulSets
// (LeaderWorkerSet) and ReplicaSets add while staying within a 63-character label value.
const MaxNameLength = 52

// WorkloadName is `{dgd}-{service}` for a stable workload and `{dgd}-{service}-{hash}`
// for a worker revision: lower-cased, DNS-safe and at most MaxNameLength characters. A
// name that would be longer keeps its hash suffix and replaces the tail of the rest with
// a short digest of the full name, so distinct inputs stay distinct.
func WorkloadName(dgd, service, hash string) string {
	return capName(sanitize(dgd+"-"+service), hash)
}

// GroupName is `{dgd}-{hash}` (a Grove PodCliqueSet holding one worker revision), or
// `{dgd}` for the stable group, under the same rules as WorkloadName.
func GroupName(dgd, hash string) string {
	return capName(sanitize(dgd), hash)
}

func capName(base, hash string) string {
	suffix := ""
	if hash != "" {
		suffix = "-" + sanitize(hash)
	}
	if len(base)+len(suffix) <= MaxNameLength {
		return base + suffix
	}
	digest := "-" + shortDigest(base)
	keep := MaxNameLength - len(suffix) - len(digest)
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
