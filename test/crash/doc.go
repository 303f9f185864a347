// Package crash holds the crash-safety and leader-election end-to-end tests: the
// operator binary (cmd/manager, built once per run) runs as separate processes against
// the local control plane (test/cluster) and is killed while DGDs roll, with the
// invariant watcher of test/e2e on every event and ownership checks on every poll.
//
//   - TestCrashSafety: SIGKILLs at random points (seeded, every kill logged with the
//     DGD's state), restarts after a short random delay, at least 20 kills per run.
//   - TestKillAtEachWrite: deterministic kills through a proxy that SIGKILLs the
//     operator right after the API server applied its n-th write.
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
package crash
