// Package lws runs the real LeaderWorkerSet (sigs.k8s.io/lws v0.9.0) controllers
// in-process, next to a local control plane (see test/cluster), so that
// LeaderWorkerSet objects really get leader/worker StatefulSets and pods.
//
//	c, _ := cluster.Start(ctx, cluster.Options{})
//	_ = c.InstallCRDs(ctx, lws.CRDPaths()...)
//	r, err := lws.Start(ctx, lws.Options{Config: c.Config})
//	if err != nil { ... }
//	defer r.Stop()
//
// Start runs a controller-runtime manager (metrics, health probes and leader
// election off) with what upstream's cmd/main.go wires for LeaderWorkerSet:
// controllers.SetupIndexes, the LeaderWorkerSet reconciler, the Pod reconciler
// (no gang-scheduling provider), and the LeaderWorkerSet and Pod webhooks
// (pkg/webhooks), served by the manager's webhook server on
// https://127.0.0.1:<free port> with a throw-away CA made in Go. It registers
// them with the API server by URL in two configurations with fixed names,
// MutatingWebhookName and ValidatingWebhookName, mirroring LWS's
// config/webhook (after its kustomize patches):
//
//	mutating   mleaderworkerset.kb.io  /mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset  leaderworkersets CREATE,UPDATE
//	mutating   mpod.kb.io              /mutate--v1-pod                                       pods CREATE         objectSelector leaderworkerset.sigs.k8s.io/name Exists
//	validating vleaderworkerset.kb.io  /validate-leaderworkerset-x-k8s-io-v1-leaderworkerset leaderworkersets CREATE,UPDATE
//	validating vpod.kb.io              /validate--v1-pod                                     pods CREATE,UPDATE  objectSelector leaderworkerset.sigs.k8s.io/name Exists
//
// all failurePolicy Fail, sideEffects None, admissionReviewVersions v1. The
// DisaggregatedSet controller and webhook run only with Options.DisaggregatedSet,
// which adds the DisaggregatedSetReconciler (as upstream's cmd/main.go wires it)
// and, to the validating configuration,
//
//	validating vdisaggregatedset.kb.io /validate-disaggregatedset-x-k8s-io-v1-disaggregatedset disaggregatedsets CREATE,UPDATE
//
// Start returns once the API server demonstrably routes admission requests of
// every registered webhook to this process (server-side dry-run probes) and the
// manager's caches are synced.
//
// The webhooks are required, not optional: the Pod webhook adds the
// group-index label (and group-key) to leader pods and the worker-index label to
// worker pods; without it the LWS controller cannot count groups and the LWS never
// becomes Ready. Because the configurations use failurePolicy Fail, a process
// killed without Stop leaves configurations behind that make LWS writes and the
// creation of LWS-labelled pods fail: Start deletes leftovers first, Stop deletes
// them, and CleanupStaleWebhooks does it on demand. Run at most one Runner per
// cluster (the names are fixed).
//
// # LeaderWorkerSet fields an adapter must set (v0.9.0)
//
// Package v1 is sigs.k8s.io/lws/api/leaderworkerset/v1. LWS's defaulting webhook
// (LeaderWorkerSetWebhook.Default) and CRD defaults fill these in; an adapter
// should set every one explicitly so that what it sends equals what is stored (no
// perpetual diff) and so that typed Go structs do not send values the CRD or the
// validating webhook rejects:
//
//   - spec.replicas (*int32): CRD default 1.
//   - spec.startupPolicy (StartupPolicyType, json "startupPolicy" WITHOUT
//     omitempty): v1.LeaderCreatedStartupPolicy ("LeaderCreated", CRD default) or
//     v1.LeaderReadyStartupPolicy ("LeaderReady", worker StatefulSet created only
//     once the leader pod is Ready). A typed struct sends "" which the CRD enum
//     rejects.
//   - spec.rolloutStrategy.type (RolloutStrategyType, json "type" WITHOUT
//     omitempty): v1.RollingUpdateStrategyType ("RollingUpdate", the only value).
//     A typed struct sends "" which the CRD enum rejects; the controller copies it
//     into the leader StatefulSet's updateStrategy.type.
//   - spec.rolloutStrategy.rollingUpdateConfiguration: the webhook sets
//     {Partition: ptr.To[int32](0), MaxUnavailable: intstr.FromInt32(1),
//     MaxSurge: intstr.FromInt32(0)} when nil. MaxUnavailable and MaxSurge are
//     intstr.IntOrString values whose omitempty encoding/json ignores: a
//     non-nil RollingUpdateConfiguration built without them sends
//     maxUnavailable: 0, maxSurge: 0, which the validating webhook rejects
//     ("must not be 0 when `maxSurge` is 0") unless replicas is 0. The validating
//     webhook also dereferences rollingUpdateConfiguration unconditionally.
//   - spec.networkConfig.subdomainPolicy (*SubdomainPolicy): the webhook sets
//     &v1.SubdomainShared ("Shared": one headless Service named after the LWS)
//     when networkConfig or subdomainPolicy is nil; the alternative is
//     v1.SubdomainUniquePerReplica (a Service per group). An update that sets it
//     back to null is rejected.
//   - spec.leaderWorkerTemplate.size (*int32): CRD default 1; total pods per
//     group (leader + size-1 workers).
//   - spec.leaderWorkerTemplate.restartPolicy (RestartPolicyType): CRD and
//     webhook default v1.RecreateGroupOnPodRestart ("RecreateGroupOnPodRestart":
//     a pod deleted or a container restarted deletes the group's leader, which
//     recreates the group); others v1.RecreateGroupAfterStart, v1.NoneRestartPolicy
//     ("None") and the deprecated v1.DeprecatedDefaultRestartPolicy ("Default"),
//     which the webhook rewrites to "None".
//   - spec.leaderWorkerTemplate.subGroupPolicy: leave nil; if set, its
//     subGroupPolicyType defaults (CRD) to v1.SubGroupPolicyTypeLeaderWorker and
//     subGroupSize is immutable.
//   - leaderWorkerTemplate.leaderTemplate may be nil (the worker template is used
//     for the leader too).
//
// # What LWS creates
//
// Leader StatefulSet <lws> (parallel pod management, partition and maxUnavailable
// driven by the rollout) with leader pods <lws>-<g>; per group a worker
// StatefulSet <lws>-<g> owned by the leader pod (so deleting a leader pod
// deletes its workers through the garbage collector) with worker pods
// <lws>-<g>-<w>, w = 1..size-1; a headless Service <lws> (Shared). Pod labels:
// v1.SetNameLabelKey (leaderworkerset.sigs.k8s.io/name), v1.GroupIndexLabelKey
// (group-index, set by the pod webhook on leaders, by the worker StatefulSet
// template on workers), v1.WorkerIndexLabelKey (worker-index, "0" on leaders from
// the template, set by the pod webhook on workers), v1.GroupUniqueHashLabelKey
// (group-key) and v1.RevisionKey (template-revision-hash). Annotations
// v1.SizeAnnotationKey and, on workers, v1.LeaderPodNameAnnotationKey. The pod
// webhook also injects LWS_LEADER_ADDRESS, LWS_GROUP_SIZE and LWS_WORKER_INDEX.
//
// # LeaderWorkerSet status (read from pkg/controllers in v0.9.0)
//
//   - status.readyReplicas: the number of groups whose leader pod is Running with
//     condition Ready=True AND whose worker StatefulSet is ready, i.e.
//     spec.replicas == status.availableReplicas and status.currentRevision ==
//     status.updateRevision (with size 1, the leader alone). So yes: groups whose
//     leader and all workers are ready (available, minReadySeconds honoured), old
//     revision or new. It counts every leader pod of the LWS, surge groups
//     (index >= spec.replicas) included; a group whose worker StatefulSet does not
//     exist yet is not counted.
//   - status.updatedReplicas: groups whose leader pod and worker StatefulSet carry
//     the current template-revision-hash, ready or not (surge groups included).
//   - status.replicas: the leader StatefulSet's status.replicas (leader pods,
//     surge included).
//   - status.observedGeneration: metadata.generation, written on every pass; it
//     does not mean the pods have converged.
//   - conditions: Available=True (reason AllGroupsReady) when every group with
//     index < spec.replicas is ready and every group in [partition, replicas) is
//     updated and ready; otherwise Progressing=True (GroupsProgressing); while some
//     group in [partition, replicas) is not on the current revision,
//     UpdateInProgress=True (GroupsUpdating) plus Progressing=True. Available is
//     mutually exclusive with the other two (they are set False when it is True).
//     UpdateInProgress is only ever set False by Available becoming True.
//   - status.hpaPodSelector: selects leader pods
//     (leaderworkerset.sigs.k8s.io/name=<lws>,leaderworkerset.sigs.k8s.io/worker-index=0).
//
// A rolling update is complete (the controller then truncates old
// ControllerRevisions) when partition is 0 and all spec.replicas groups are
// updated and ready.
package lws
