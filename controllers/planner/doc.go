// Package planner plans rolling updates of disaggregated LLM inference graphs: given
// the desired worker services and the observed workloads of every revision, Compute
// returns the replica count of every (service, revision) workload for one reconcile
// pass. It is pure (values in, plan out, standard library only); Simulate replays a
// whole rollout and CheckState, CheckAvailability and CheckStep state the invariants
// for tests and invariant watchers. ROLLOUT.md ("The rollout", "Partition, pause,
// progress") is the specification.
//
// # Terms
//
// A pool is one revision's workloads; the update pool is Input.UpdateRevision's, every
// other pool is old. The base is the oldest old pool still holding replicas of a
// service with R_s > 0; the other old pools are intermediates (a retarget A→B→C makes
// B one). Per service s: R_s desired replicas, and from ResolveBudgets
// surge_s = ⌈maxSurge⌉, unav_s = ⌊maxUnavailable⌋ (both 0 and R_s > 0: surge_s = 1).
// A service with R_s = 0 (or missing from the spec) is retired. Ready counts are
// r = min(Ready, Spec) per workload; replicas above Spec are terminating.
//
// # Invariants (every plan, checked by CheckStep)
//
//	surge:        Σ_pools n_s <= R_s + surge_s         (if the input already exceeds
//	              it, R_s was lowered: no workload of s grows in this step)
//	availability: Σ_pools ready_s after >= min(R_s - unav_s, Σ_pools ready_s before)
//	ratio:        per pool, |n_s/R_s - n_t/R_t| <= max(1/R_s, 1/R_t)
//	              ⇔ |n_s·R_t - n_t·R_s| <= max(R_s, R_t), for R_s, R_t > 0
//	orphan:       per pool, n_s = 0 for every s, or n_s >= 1 for every s (R_s > 0)
//
// where n is the target, and "ready after" assumes the worst: scaling a workload from
// c to t < c leaves min(r, t) ready when UnreadyFirst (Deployment), else
// max(0, r-(c-t)) (LWS removes the highest index, ready or not); new replicas are
// unready. Below its floor a service may still lose unready replicas (as Deployment's
// cleanupUnhealthyReplicas does), never ready ones. Ratio and orphan are required of a
// pool that satisfied them in the input (R_s changes can break them; the planner then
// moves back toward them). Isolation (one revision per pool) is structural. The
// caller writes every decrease before any increase, so surge and availability also
// hold between single writes; the ratio holds at plan granularity.
//
// # One RollingUpdate step
//
// Goals: the update pool ends at R_s - O_s, the base at O_s (PartitionCounts; 0
// without partition), every intermediate at 0. Then, from the current specs c:
//
//	budget  B_s = max(0, Σ_pools r_s - (R_s - unav_s))
//	shrink  per pool above its goal: lo_s = max(goal_s, min count losing <= B_s)
//	        target = raise(lo, c): the least valid pool vector in [lo, c]; B_s -= loss
//	room    ρ_s = R_s + surge_s - Σ_pools target_s   (0 if the input exceeds R+surge)
//	grow    per pool below its goal: hi_s = min(goal_s, c_s + ρ_s)
//	        target = lower(c, hi): the greatest valid pool vector in [c, hi]; ρ_s -= gain
//
// Valid pool vectors (ratio and orphan) are closed under componentwise min and max, so
// when c is valid the least and greatest valid vectors of those boxes exist; raise and
// lower find them by iterating the rules' bounds to a fixpoint (lattice.go). Hence the
// ratio holds by construction, with no fraction grid to get stuck on, and each pool
// moves as far as its budgets allow in one plan.
//
// Lockstep: the step is planned first with the open window
// |n_s/R_s - n_t/R_t| < max(1/R_s, 1/R_t) (strict 1 in lattice.go), provided every
// pool is inside it. That window still holds a chain from 0 to R_s moving each
// service by at most one replica per step (n_s = ⌈k·R_s/R_max⌉), so with maxSurge >= 1
// everywhere the roles of a pool move together, as DisaggregatedSet's common step
// index moves them: prefill 4 / decode 2 go (1,1) (2,1) (3,2) (4,2), never 1/2 apart.
// If that step moves nothing but would once the update pool's pending replicas are
// ready, the plan waits for them (one role's gangs ready before the other's do not
// let it run ahead). Only when the open window cannot move even with every update
// replica ready (tight budgets, e.g. a maxSurge 0 service coupled to a
// maxUnavailable 0 one) does the step below run with the full window, and the
// fallbacks after it. Every lockstep move is a move of the full window toward the
// goals, so Progress below holds unchanged. TestLockstepHolds checks 3,000 random
// rollouts with per-service readiness delays: no pool ever leaves the open window.
//
// Order: intermediates shrink newest first, the base only once they are empty
// (ROLLOUT.md: intermediate revisions first, old capacity last), the update pool last
// (it is above its goal only after R_s fell or the partition rose); the update pool
// grows first, then the base toward O_s (after the partition rose). Two fallbacks run
// only when that moves nothing while intermediates hold replicas: the same step
// letting the base shrink early, kept if the update pool grows or an over-surge
// service shrinks; then, with every replica ready, the base absorbs the surge room
// (rolling.go, absorb) so that a service without availability budget gets the surplus
// ready replica an intermediate needs before it can go. Retired services follow their
// pools: 0 at once on the update revision; on an old revision 0 in the step its last
// active replicas go (a pool holding only retired services drains once the update
// pool is at its goal and ready).
//
// # Worked example: prefill R=4, decode R=2, 25%/25%
//
// prefill: surge ⌈1⌉ = 1, unav ⌊1⌋ = 1 (floor 3, limit 5); decode: surge ⌈0.5⌉ = 1,
// unav ⌊0.5⌋ = 0 (floor 2, limit 3); ratio |p/4 - d/2| <= 1/2.
// Pools written (prefill, decode), every replica ready by the next step:
//
//	step 1: B = (4-3, 2-2) = (1, 0)   old (4,2) → raise((3,2), (4,2)) = (3,2)
//	        ρ = (5-3, 3-2) = (2, 1)   new (0,0) → lower((0,0), (2,1)) = (2,1)
//	step 2: ready (5,3): B = (2, 1)   old (3,2) → (1,1)   |1/4 - 1/2| <= 1/2
//	        ρ = (5-3, 3-2) = (2, 1)   new (2,1) → (4,2)
//	step 3: ready (5,3): B = (2, 1)   old (1,1) → (0,0)   the pool empties at once
//	step 4: Completed.
//
// At every step Σ prefill <= 5, Σ decode <= 3, ready prefill >= 3, ready decode >= 2.
//
// # Other strategies and states
//
// Recreate scales every old workload to 0 at once and sets R_s on the update revision
// once no old replica exists (Spec and Current 0); no availability, no partition.
// Paused freezes a rollout in progress (an old workload with Spec or Current > 0):
// every target equals its spec. A first deploy or a scale-only change (no old
// replicas) is not a rollout: the update revision is set to R_s even when paused (as
// Deployment scales while paused) — in one step, since its growth is within surge;
// a scale-down of a non-UnreadyFirst workload is limited by availability. Partition
// keeps O_s on the base (Phase Partitioned once the update pool is ready); lowering it
// resumes, raising it moves replicas back to the base (StatefulSet-like), nil or 0
// completes. A base without a workload of some active service cannot be a canary split
// of the graph: the plan holds everything (Blocked) until the partition is 0.
//
// # Progress
//
// With goals fixed, every move but absorb brings some pool toward its goal, so the
// distance Φ = Σ |n - goal| falls strictly; absorb cannot cycle (intermediates never
// grow, the base only shrinks back once they are empty or while the update pool
// grows), so a rollout ends. For two revisions a settled state (every replica ready)
// that is not done always moves, except the infeasible start: the update pool is
// empty, a service with R_s = 1 and maxSurge 0 holds its replica on the old revision
// (it can neither be added first nor leave first: surge, orphan) and the old pool
// cannot empty in one step (another service t has unav_t < R_t). No valid sequence
// exists then; the plan is Blocked. TestExhaustiveTwoServices checks every state
// reachable with R <= 5 for this. With three revisions, tight budgets (one service
// with maxSurge 0 or one replica, another with maxUnavailable 0) can need an
// intermediate to grow back first, which the planner never does: Blocked again (13 of
// 5,728 random retargets in the tests; none of 3,000 with the default 25%/25%
// budgets, TestRetargetWithDefaultBudgets).
//
// # Step bound
//
// Per settled step the pools move by about δ of every service, where
//
//	δ = max(min(u + v, 1), 1/R_max),  u = min_s unav_s/R_s,  v = min_s surge_s/R_s:
//
// the shrink frees u of every service (B_s >= unav_s when settled), the grow adds v on
// top of what was freed, and the ratio windows (>= 1/R_max) allow one replica of slack
// when u + v is smaller. With K = ⌈1/δ⌉, an event-free rollout takes at most
// (K+1)(D+1) + 2 plans, the final Completed or Partitioned one included, when every
// new replica is ready within D steps (K + 3 when ready by the next step). Examples:
// one service R=4 at 25%/25%: δ = 1/2, K = 2, 4 plans; P=8/D=4 with maxSurge 1,
// maxUnavailable 0: δ = 1/8, K = 8, 10 plans. Note that max_s ⌈R_s/(surge_s+unav_s)⌉ is not a bound:
// a maxSurge 0 service coupled to a maxUnavailable 0 one moves about one replica per
// step whatever the other budgets. The bound is checked on every event-free rollout
// of TestRandomRollouts (0 to 5 steps of readiness delay); it is argued, not proven,
// for several services.
package planner
