// Package decide decides one pass of the DynamoGraphDeployment reconciler from a
// Snapshot (everything the pass observed) and returns a Decision (what the pass does).
// Decide is pure, like controllers/planner: it reads nothing but the Snapshot and writes
// nothing, so a pass can be tested as a table of snapshots in and decisions out.
//
// Decide runs in this order (decide.go):
//   - view.go: the spec checked (an invalid spec stops the pass, InvalidSpec) and each
//     service's backend chosen from the backends' Descriptions;
//   - stable.go relabel: labels someone stripped from a workload put back;
//   - history.go: the revision history synced (created, renumbered, pruned), its one
//     identity per revision a revisions.Ref;
//   - platform.go, objects.go: the objects the pods need (RBAC, ConfigMaps, SSH key);
//   - stable.go: the stable services (frontend, planner) ensured, and a stable
//     workload replaced side by side retired once its successor is ready;
//   - abort.go: an abort or retry resolved, and the goal revision chosen;
//   - stepped.go, book.go: spec.rollout.steps run by controllers/steps, analysis
//     results the snapshot holds recorded and the measurements still due listed
//     (Decision.Measure: queried off the pass, taken by a later one);
//   - rollout.go, input.go: the planner's plan turned into ordered writes (decreases,
//     then increases, then cleanup), and the workloads the pass leaves;
//   - services.go: the discovery Services and those to prune;
//   - unschedulable.go: pods the scheduler could not place, by service;
//   - counts.go, progress.go, conditions.go: the status the pass leaves;
//   - conclude.go: the status and Events once the writes are made (Decision.Conclude).
//
// draft.go accumulates a Decision while it is decided; decision.go and snapshot.go
// define the values that cross the package boundary.
package decide
