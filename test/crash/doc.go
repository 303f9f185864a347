// Package crash holds the crash-safety and leader-election end-to-end tests: the
// operator binary (cmd/manager, built once per run) runs as separate processes against
// the local control plane (test/cluster) and is killed while DGDs roll, with the
// invariant watcher of test/e2e on every event and ownership checks on every poll.
//
//   - TestCrashSafety: SIGKILLs at random points (seeded, every kill logged with the
//     DGD's state), restarts after a short random delay, at least 20 kills per run.
//   - TestKillAtEachWrite: deterministic kills through a proxy that SIGKILLs the
//     operator right after the API server applied its n-th write.
//   - TestKillInsidePasses: kills between two writes of one Decision. The operator
//     logs each pass's writes before making them (debug level, "executing"); the
//     proxy attributes the API write requests that follow to that pass, and kills
//     after request j of a pass of a given shape (its writes, hashes and revision
//     numbers blanked). A reference transition run without kills lists the passes and
//     their requests; the transition is then repeated, killing once per shape in each,
//     until every position j = 1..m of every targeted pass was killed at (m: the
//     pass's requests before its status write, so the last position is every write
//     made and the status not). After each kill: ownership (nothing orphaned), under
//     Recreate no Ready True while no revision holds every service's replicas, then a
//     restart and convergence with the invariant watcher silent. Cases: a rolling
//     update with surge (every pass: the first of the new revision, the step, the
//     cleanup deleting the old workloads, the pass deleting the old ControllerRevision
//     under revisionHistoryLimit 1), Recreate (its first pass: CreateRevision, the
//     Ready False announcement, the scale-down), a scale up and down (every pass);
//     CRASH_ALL=1 adds every pass of Recreate, multinode gangs on LeaderWorkerSets and
//     a first deploy. Positions are API requests: a write that sends none (an Ensure
//     of what exists) is the same crash point as the request before it.
//   - TestLeaderElection: two processes with leader election; only the Lease holder
//     acts; SIGKILL and SIGTERM of the leader hand over within the lease duration.
//
// The tests are Linux-only (process groups, Pdeathsig) and skip when
// bin/kube-controller-manager is missing. Knobs (environment):
//
//	CRASH_SEED=<n>          replay TestCrashSafety's kill schedule
//	CRASH_MODES=write,...   kill triggers besides spec changes (events, write, uptime)
//	CRASH_MAX_WRITES=<n>    the write trigger kills after 1..n operator writes (default 6)
//	CRASH_KEEP_LOGS=1       keep the operator logs (the path is printed)
//	CRASH_ALL=1             TestKillInsidePasses kills in every pass of every case
//	CRASH_CASES=surge,...   TestKillInsidePasses runs only these cases (surge, recreate,
//	                        scale, lws, first-deploy)
package crash
