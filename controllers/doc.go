// Package controllers holds the DynamoGraphDeployment reconciler (reconciler.go). A pass
// over one DGD (pass.go, Reconcile) is three steps, each a value handed to the next:
//
//  1. read (pass.go) reads the DGD, past the cache when the cache predates the
//     operator's own last status write; observe (observe.go) reads the rest, and
//     writes nothing: the DGD's workloads on every backend with their pods counted and
//     their readiness as Dynamo's discovery routes it (discovery.go), whether the cache
//     shows the operator's last writes (expectations.go), its ControllerRevisions, the
//     other objects it owns and the objects its pods need. The result is a
//     decide.Snapshot.
//  2. decide (controllers/decide) is a pure function of the Snapshot: decide.Decide
//     returns a decide.Decision, the writes in order, the status, the Events, the
//     metrics and the next requeue. When it needs more than the Snapshot holds (a
//     Grove workload's name, the pods the scheduler could not place) it says so in
//     Decision.Needs; the reconciler reads that into the Snapshot (observeMore) and
//     decides again. Analysis queries never hold a pass: the Snapshot holds the
//     results already fetched, the Decision lists the measurements still due
//     (Decision.Measure), and the measurement runner (measure.go) queries them in
//     the background and enqueues the DGD when a result lands.
//  3. execute (execute.go) makes the writes in order through the backends, the revision
//     history and the client; the first that fails ends it, and the decide.Outcome says
//     what was made. Decision.Conclude folds the Outcome into the status, and report
//     (report.go) writes the status and emits the Events.
//
// setup.go registers the controller and its watches (the runner's landed results
// among them); metrics.go the operator's metrics; unschedulable.go shares a
// namespace's unschedulable pods among its DGDs. dynamo.go observes and writes the
// objects of Dynamo's own operator when a DGD is taken over from it (decide/dynamo.go),
// with dynamo_ingress.go and dynamo_disaggregatedset.go for the kinds it exposes and
// the kinds it cannot take, and dynamo_marks.go for how an object is known as Dynamo's.
package controllers
