// Package gangs checks, from pod specs alone, that the pods of a multinode
// NVIDIA Dynamo worker would form one process group if their containers ran.
//
// KWOK never starts containers, so the tests cannot watch vLLM, SGLang or
// TRT-LLM rendezvous. This package computes what each process would be
// started with instead:
//
//  1. [Expand] resolves a container's env and `$(VAR)` references the way the
//     kubelet does. The semantics are copied from
//     k8s.io/kubernetes@v1.36.2/third_party/forked/golang/expansion/expand.go
//     (Expand, tryReadVariableName, MappingFuncFor),
//     pkg/kubelet/kubelet_pods.go:840-966 (makeEnvironmentVariables: env is
//     resolved in declaration order, each value sees only earlier variables) and
//     pkg/kubelet/container/helpers.go:265-281 (ExpandContainerCommandAndArgs:
//     command and args see the whole env).
//  2. [Shell] evaluates the small POSIX sh subset found in Dynamo's
//     `sh -c` command lines (exec, &&, $((...)), ${VAR}, quotes, and the
//     `$(echo ... | sed ...)` host list that TRT-LLM uses on LWS).
//  3. [GroupLWS] and [GroupGrove] split pods into gangs (one LWS group, or one
//     Grove PodCliqueScalingGroup replica).
//  4. [Check] reports every reason a gang would not form.
//
// How the pods look:
//
//   - LWS v0.9.0, subdomainPolicy Shared. The leader StatefulSet is named
//     <lws> with serviceName <lws> (pkg/controllers/leaderworkerset_controller.go:833-835).
//     The worker StatefulSet for group g is named after the leader pod, <lws>-<g>.
//     Its serviceName is <lws> when Shared (pkg/controllers/pod_controller.go:429-436),
//     and its ordinals start at 1 (:440). The StatefulSet controller sets
//     hostname = pod name and subdomain = serviceName
//     (k8s.io/kubernetes pkg/controller/statefulset/stateful_set_utils.go:436-441, initIdentity).
//     So the leader is <lws>-<g> and worker i is <lws>-<g>-<i>; every pod has
//     subdomain <lws>. The pod webhook (pkg/webhooks/pod_webhook.go:101-157)
//     labels the leader's group-index from its ordinal and each worker's
//     worker-index from its ordinal. AddLWSVariables then *prepends* the
//     env vars LWS_LEADER_ADDRESS, LWS_GROUP_SIZE and LWS_WORKER_INDEX
//     (pkg/utils/pod/pod_utils.go:131-179). The code that sets the address
//     (pod_utils.go:143-146) is
//     `fmt.Sprintf("%s-%s.%s.%s", lwsName, groupIndex, pod.Spec.Subdomain, pod.ObjectMeta.Namespace)`.
//     This gives <lws>-<g>.<lws>.<ns>, which is <leader hostname>.<subdomain>.<namespace>.
//   - Grove (notes/grove-facts.md §2): hostname <pclq>-<k>, subdomain <pcs>-0, and
//     GROVE_HEADLESS_SERVICE=<pcs>-0.<ns>.svc.cluster.local.
//     GROVE_PCSG_NAME, GROVE_PCSG_INDEX and GROVE_PCLQ_POD_INDEX come from label fieldRefs.
//   - Dynamo's command lines follow notes/dynamo-multinode.md §2-§5.
package gangs
