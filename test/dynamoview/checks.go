package dynamoview

import (
	"fmt"
	"sort"
	"strings"
)

// CheckIsolation verifies that each Dynamo namespace holds one worker revision: every
// visible worker instance registered in it (by an Endpoint or Model record) must run in
// a pod carrying the same nvidia.com/dynamo-worker-hash label value (a missing label
// counts as the value ""). Pods are looked up by name among the pods passed to Compute;
// a visible instance whose pod is already gone (its EndpointSlice and DWM lag its
// deletion, as a real frontend's view does) is skipped: what isolates it was checked
// while its pod existed. Workers
// pair only inside one Dynamo namespace (model_manager.rs reconcile_discovery_topology),
// so two revisions in one namespace mean prefill of one generation would discover decode
// of another. It returns human-readable violations, sorted; none means isolated.
func CheckIsolation(v View) []string {
	var out []string
	for _, k8sNs := range v.K8sNamespaces() {
		// Dynamo namespace -> hash -> pod names.
		revs := map[string]map[string][]string{}
		for _, in := range v.Instances(k8sNs) {
			if len(in.Metadata.Endpoints) == 0 && len(in.Metadata.ModelCards) == 0 {
				continue // e.g. a frontend's DWM: not a worker instance
			}
			if in.Pod == nil {
				continue
			}
			hash := in.Pod.Labels[LabelWorkerHash]
			for _, dns := range in.DynamoNamespaces() {
				if revs[dns] == nil {
					revs[dns] = map[string][]string{}
				}
				revs[dns][hash] = append(revs[dns][hash], in.PodName)
			}
		}
		for _, dns := range sortedKeys(revs) {
			if len(revs[dns]) < 2 {
				continue
			}
			var parts []string
			for _, h := range sortedKeys(revs[dns]) {
				pods := revs[dns][h]
				sort.Strings(pods)
				parts = append(parts, fmt.Sprintf("%s=%q: %s", LabelWorkerHash, h, strings.Join(pods, ", ")))
			}
			out = append(out, fmt.Sprintf("k8s namespace %q, Dynamo namespace %q holds %d worker revisions (%s): prefill of one generation would discover decode of another",
				k8sNs, dns, len(revs[dns]), strings.Join(parts, "; ")))
		}
	}
	sort.Strings(out)
	return out
}
