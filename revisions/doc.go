// Package revisions records the graph templates of a DynamoGraphDeployment (DGD) as
// ControllerRevisions, following the conventions of the StatefulSet controller
// (k8s.io/kubernetes/pkg/controller/history).
//
// A DGD's workers (services whose componentType is worker, prefill or decode) move
// between revisions together: prefill and decode workers of one revision share a Dynamo
// namespace and must never talk to workers of another. What rolls is thus decided by the
// WorkerTemplate, the pod-shaping part of every worker service plus the graph-level envs
// and backend. Its hash (Hash) labels the revision and names the side-by-side workloads
// and the Dynamo namespace suffix of that revision's workers.
//
// A revision records the whole graph (GraphTemplate: the worker template and every
// stable service), so a change to the frontend or planner alone is a revision too, one
// that shares its workers' hash and rolls nothing, and an undo restores every service.
// The graph's hash (GraphHash) names the revision.
//
// The package has four layers:
//
//   - hash.go: WorkerTemplate, NewWorkerTemplate and Hash, pure functions. What the hash
//     covers and excludes is documented on WorkerTemplate; a golden test pins the hash of
//     a sample DGD so that a dependency bump cannot silently re-roll every cluster.
//   - revision.go: pure helpers over ControllerRevisions: NewRevision, Equal, FindEqual,
//     NextRevision, HashOf, RevisionName.
//   - history.go and fake.go: Interface, the storage of a DGD's revisions, with a real
//     implementation over a controller-runtime client (NewHistory) and an in-memory one
//     for unit tests (NewFake).
//   - sync.go and rollback.go: Sync, the per-reconcile flow (find or create the update
//     revision, renumber it on a revert, pick the current revision, truncate history),
//     and Restore, which re-applies a revision's services to a DGD spec.
//
// Revision numbers follow StatefulSet: every distinct graph template gets the next
// number when it first appears, and a template that comes back (A -> B -> A, or
// "kubectl dgd rollout undo") has its existing revision renumbered as the newest rather
// than a duplicate created.
package revisions
