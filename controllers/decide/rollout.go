package decide

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/planner"
)

// moveWorkers asks the planner for this pass's replica targets and decides their writes:
// every decrease first, then every increase (creating missing workloads of the goal
// revision), so that surge and availability hold between the individual writes too;
// then the deletion of old revisions whose pools are drained.
//
// In cohort form the split of the traffic is decided first, from the state the plan
// leaves, and written before any worker write; a cohort the plan drains while it still
// takes traffic holds every worker write (traffic.go). The prelude of cohorts
// (prelude) holds them too.
func moveWorkers(v *view, c course, prelude string, d *draft) (moves, error) {
	in := c.input(v, v.workers())
	followers := c.followers(v, v.workers())
	m := moves{plan: planner.Follow(in, planner.Compute(in), followers)}
	switch {
	case v.form.unservable != "":
		m.hold = &held{reason: v1alpha1.ReasonTrafficNotServing, why: v.form.unservable}
		m.plan = holdPlan(in, followers, v.form.unservable)
	case prelude != "":
		m.hold = &held{reason: v1alpha1.ReasonCohortPrelude, why: prelude}
		m.plan = holdPlan(in, followers, prelude)
	}
	tp, err := decideTraffic(v, c, m.plan)
	if err != nil {
		return m, err
	}
	m.traffic = tp
	if err := writeTraffic(v, tp, d); err != nil {
		return m, err
	}
	d.requeueIn(tp.requeue)
	switch why := tp.notServing(); {
	case m.hold != nil:
	case why != "":
		m.hold = &held{reason: v1alpha1.ReasonTrafficNotServing, why: why}
		m.plan = holdPlan(in, followers, why)
	case tp.hold != "":
		m.hold = &held{reason: v1alpha1.ReasonTrafficDraining, why: tp.hold}
		m.plan = holdPlan(in, followers, tp.hold)
	}
	d.Targets = m.plan.Targets
	decreases(v, c, m.plan, d)
	m.created = increases(v, c, m.plan, d)
	cleanup(v, c, m.plan, d)
	return m, nil
}

// holdPlan is the plan that moves nothing: every (service, revision) of the input at
// the replicas set on it, the update revision's missing ones at 0.
func holdPlan(in planner.Input, followers []planner.Follower, why string) planner.Plan {
	n := map[planner.Target]int32{}
	for _, w := range in.Workloads {
		n[planner.Target{Service: w.Service, Revision: w.Revision}] += w.Spec
	}
	for _, f := range followers {
		for _, w := range f.Workloads {
			n[planner.Target{Service: w.Service, Revision: w.Revision}] += w.Spec
		}
	}
	for _, s := range in.Spec.Services {
		k := planner.Target{Service: s.Name, Revision: in.UpdateRevision}
		n[k] += 0
	}
	p := planner.Plan{Phase: planner.PhaseWaiting, Reason: why}
	for k, r := range n {
		k.Replicas = r
		p.Targets = append(p.Targets, k)
	}
	sort.Slice(p.Targets, func(i, j int) bool {
		a, b := p.Targets[i], p.Targets[j]
		return a.Service < b.Service || a.Service == b.Service && a.Revision < b.Revision
	})
	return p
}

// updateCohortFronts decides, in cohort form, the in-place update of the goal
// revision's cohort frontends to the goal's frontend templates (a frontend-only
// change): an Ensure that writes only when the template differs, replicas as they are.
// A backend that HoldsPools keeps a cohort's frontend in an object of its own per
// template (backends/grove cohort.go: Grove's RollingRecreate would delete the one pod
// before its replacement), so its Ensure makes the new template's object beside the old
// one, at the replicas the key has; the old one, then Outdated, goes once the new one is
// ready (retireStable). There, a goal revision whose workers run without a frontend (its
// pool's create failed between the workers' object and the frontend's, or a frontend
// service added since: the pool is made whole or not at all, mayCreate) gets it.
func updateCohortFronts(v *view, c course, d *draft) {
	if !v.form.cohorts {
		return
	}
	goal := c.h.goalHash()
	for _, name := range v.form.frontends {
		spec := c.goalDGD.Spec.Services[name]
		if spec == nil {
			continue
		}
		if b := v.backendOf[name]; b.HoldsPools {
			ensureHeldFront(v, c, d, b.Kind, backends.Key{Service: name, Hash: goal}, spec)
			continue
		}
		for _, w := range v.Workloads {
			if w.Service != name || w.Hash != goal || w.Terminating {
				continue
			}
			d.write(Write{Op: Ensure, Backend: w.Backend, From: c.goalDGD, Pool: backends.Pool{Hash: goal,
				Services: []backends.ServiceWorkload{{Key: w.Key, Spec: spec, Replicas: w.Replicas, InPlace: true}}}})
		}
	}
}

// ensureHeldFront is updateCohortFronts' Ensure of the goal's cohort frontend key on a
// backend that HoldsPools: one write for the key (it may have two objects, the outdated
// one beside its replacement), at the most replicas one of them has. Every live one
// outdated (the backend reports so when none runs the goal's template), the Ensure
// makes the new template's, which the pass says and leaves (d.made). None live: a
// frontend of 1 (the planner grows it) for a goal whose workers have pods (their
// object is older than a pass: the frontend's, made just after it by the same Ensure,
// would be in the cache), outside the prelude (which makes the running revision's at
// full size itself).
func ensureHeldFront(v *view, c course, d *draft, kind string, key backends.Key, spec *v1alpha1.DynamoComponentDeploymentSharedSpec) {
	var replicas int32
	var live, current int
	workers := false
	for _, w := range v.Workloads {
		switch {
		case w.Terminating || w.Hash != key.Hash:
		case w.Key == key:
			live, replicas = live+1, max(replicas, w.Replicas)
			if !w.Outdated {
				current++
			}
		case !v.form.isFrontend(w.Service) && w.Replicas > 0 && max(w.Current, w.Pods) > 0:
			workers = true
		}
	}
	why := fmt.Sprintf("beside its old template in revision %d's cohort", c.h.number(key.Hash))
	switch {
	case live == 0 && (!workers || v.form.prelude || spec.DesiredReplicas() == 0):
		return
	case live == 0:
		replicas, why = 1, fmt.Sprintf("for revision %d's cohort, whose workers ran without it", c.h.number(key.Hash))
	}
	sw := backends.ServiceWorkload{Key: key, Spec: spec, Replicas: replicas, InPlace: true}
	w := Write{Op: Ensure, Backend: kind, From: c.goalDGD, Pool: backends.Pool{Hash: key.Hash, Services: []backends.ServiceWorkload{sw}}}
	if current == 0 {
		name := v.name(kind, key)
		w.Progress, w.Expect = true, map[string]int32{name: replicas}
		w.Say = []string{fmt.Sprintf("created %s at %d %s", name, replicas, why)}
		d.made = append(d.made, Workload{Backend: kind, Workload: backends.Workload{Key: key, Kind: kind, Name: name, Replicas: replicas}})
	}
	d.write(w)
}

// target is the planned replica count of a workload, or def when the plan has none.
func target(h *history, plan planner.Plan, k backends.Key, def int32) int32 {
	if t, ok := planned(h, plan, k); ok {
		return t
	}
	return def
}

// planned is the plan's replica count of k's service at k's revision, if it has one.
func planned(h *history, plan planner.Plan, k backends.Key) (int32, bool) {
	rev := h.number(k.Hash)
	for _, t := range plan.Targets {
		if t.Service == k.Service && t.Revision == rev {
			return t.Replicas, true
		}
	}
	return 0, false
}

// targetOf is the planned replica count of the observed worker workload w. The plan
// counts per (service, revision), as the planner merges the workloads it is given
// (planner.merge); most (service, revision)s have one workload, which gets the target
// whole. Several live ones share one where Dynamo's operator left them (a take-over:
// every worker hash of Dynamo's is revision 0, and Dynamo's operator stopped mid-way
// through its own rolling update leaves two; an older Dynamo ran one LeaderWorkerSet
// per replica): each keeping the target whole would scale every one of them to the
// sum (measured before: Dynamo's 1+1 both scaled to 2, past maxSurge). The target is
// spread over them in name order, each keeping up to its replicas, a growth going to
// the first, so that they sum to it.
//
// An Outdated workload (a cohort frontend's old template beside its replacement, on a
// backend that replaces them side by side: backends/grove) is none of them: it keeps
// its replicas until retireStable deletes it once the replacement is ready, and goes
// with its pool when the plan drains the (service, revision). Spread with it, a target
// could land on the old one first and take the new one to 0 (R = 1: the old one, first
// by name, keeps 1 and the new one is scaled 1→0 in the pass that deletes the old one).
func (v *view) targetOf(h *history, plan planner.Plan, w Workload) int32 {
	t, ok := planned(h, plan, w.Key)
	switch {
	case !ok || w.Terminating:
		return target(h, plan, w.Key, w.Replicas)
	case w.Outdated && t == 0:
		return 0
	case w.Outdated:
		return w.Replicas
	}
	var peers []Workload
	for _, p := range v.workers() {
		if p.Service == w.Service && !p.Terminating && !p.Outdated && h.number(p.Hash) == h.number(w.Hash) {
			peers = append(peers, p)
		}
	}
	if len(peers) < 2 {
		return t
	}
	sort.Slice(peers, func(i, j int) bool { return peers[i].Name < peers[j].Name })
	share := map[string]int32{}
	left := t
	for _, p := range peers {
		share[p.Name] = min(p.Replicas, left)
		left -= share[p.Name]
	}
	share[peers[0].Name] += left
	return share[w.Name]
}

// byRole orders writes so that a crash between two writes of one step never leaves a
// pool with prefill but no decode (prefill needs a decode worker to hand its KV cache
// to; a decode worker alone can serve). grow orders decode first, a shrink prefill first.
func byRole(goalDGD *v1alpha1.DynamoGraphDeployment, ws []Workload, grow bool) []Workload {
	rank := func(service string) int {
		role := v1alpha1.ComponentTypeWorker
		if svc := goalDGD.Spec.Services[service]; svc != nil {
			role = svc.Role()
		}
		if svc := goalDGD.Spec.Services[service]; svc != nil && svc.ComponentType == v1alpha1.ComponentTypeFrontend {
			role = roleFrontend
		}
		// A cohort's frontend comes first on the way up and goes last on the way down.
		r := map[string]int{roleFrontend: -1, v1alpha1.ComponentTypeDecode: 0, v1alpha1.ComponentTypeWorker: 1, v1alpha1.ComponentTypePrefill: 2}[role]
		if !grow {
			r = -r
		}
		return r
	}
	sort.SliceStable(ws, func(i, j int) bool { return rank(ws[i].Service) < rank(ws[j].Service) })
	return ws
}

// decreases scales workloads down. An old revision whose every workload the plan takes
// to zero is deleted instead: its pods go exactly as they would at zero (their
// terminating pods still count against surge until gone), and the revision is gone in
// one write per workload rather than a scale to zero and, a step later, a delete. A
// revision held in one object (a Grove PodCliqueSet) is deleted whole, never scaled to
// zero clique by clique, which Grove reports as lost replicas and arms gang
// termination for.
func decreases(v *view, c course, plan planner.Plan, d *draft) {
	drains := drainedGroups(v, c, plan)
	for _, w := range byRole(c.goalDGD, v.workers(), false) {
		if w.Terminating {
			continue
		}
		if dynamoGrove(w) {
			decreaseDynamoGrove(v, c, plan, d, w, drains[groupOf(w.Workload)])
			continue
		}
		if drains[groupOf(w.Workload)] || v.targetOf(c.h, plan, w) < w.Replicas {
			announceRecreate(v, c, w, d)
		}
		if drains[groupOf(w.Workload)] {
			deleteWorkload(v, d, w, fmt.Sprintf("revision %d drained", c.h.number(w.Hash)))
			continue
		}
		if t := v.targetOf(c.h, plan, w); t < w.Replicas {
			scale(d, w, t)
		}
	}
}

// announceRecreate decides a status write of Ready False (ReasonRecreating) before the
// first write of a Recreate rollout that takes an old revision's pods away (w's), when
// the DGD read still reports Ready: the pass's own status comes only after its writes,
// and a whole Grove PodCliqueSet deleted, or its discovery Services pruned, leaves the
// graph unroutable before then (Dynamo's observer would see Ready over a graph it
// cannot route). Once per pass, and once per rollout: the next pass reads Ready False.
func announceRecreate(v *view, c course, w Workload, d *draft) {
	goal := c.h.goalHash()
	if v.dgd.RolloutOrDefault().Strategy != v1alpha1.RecreateStrategy || w.Hash == "" || w.Hash == goal ||
		!meta.IsStatusConditionTrue(v.dgd.Status.Conditions, v1alpha1.ConditionReady) || d.announced() {
		return
	}
	st := v.dgd.Status.DeepCopy()
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonRecreating,
		Message:            fmt.Sprintf("Recreate: revision %d is taken down before revision %d starts", c.h.number(w.Hash), c.h.number(goal)),
		ObservedGeneration: v.dgd.Generation, LastTransitionTime: metav1.NewTime(v.Now),
	})
	d.write(Write{Op: AnnounceStatus, Status: st})
}

// drainedGroups lists the objects (by groupOf) of the old revisions whose every live
// workload the plan takes to zero.
func drainedGroups(v *view, c course, plan planner.Plan) map[string]bool {
	goal := c.h.goalHash()
	drained := map[string]bool{} // worker hash -> every live workload at zero
	for _, w := range v.workers() {
		if w.Terminating {
			continue
		}
		dr, seen := drained[w.Hash]
		drained[w.Hash] = (dr || !seen) && w.Hash != goal && v.targetOf(c.h, plan, w) == 0
	}
	// Under Recreate a Deployment or LeaderWorkerSet is scaled to zero first and deleted
	// once drained (cleanup): the new revision starts when the old reports no pods, a
	// wait that then never rests on the pod list alone.
	recreate := v.dgd.RolloutOrDefault().Strategy == v1alpha1.RecreateStrategy
	out := map[string]bool{}
	for _, w := range v.workers() {
		if !w.Terminating && drained[w.Hash] && (!recreate || w.Group != nil) {
			out[groupOf(w.Workload)] = true
		}
	}
	return out
}

// scale sets one workload's replicas and expects the cache to show them.
func scale(d *draft, w Workload, replicas int32) {
	d.write(Write{Op: Scale, Backend: w.Backend, Workload: w.Workload, Replicas: replicas,
		Expect: map[string]int32{w.Name: replicas}, Progress: true,
		Say: []string{fmt.Sprintf("scaled %s %d→%d", w.Name, w.Replicas, replicas)}})
}

// increases scales up existing workloads of the plan and creates the goal revision's
// missing workloads (one Ensure per backend, so a backend that keeps a whole revision in
// one object sees the pool together), and returns those it creates.
func increases(v *view, c course, plan planner.Plan, d *draft) []Workload {
	existing := map[backends.Key]Workload{}
	for _, w := range byRole(c.goalDGD, v.workers(), true) {
		existing[w.Key] = w
		if w.Terminating {
			continue // gone before it is made again: the pass after its deletion creates it
		}
		if t := v.targetOf(c.h, plan, w); t > w.Replicas {
			scale(d, w, t)
		}
	}
	pools, order := missingPools(v, c, plan, existing)
	var created []Workload
	// The backends create in the order their first service comes in, decode first
	// (workerNamesByRole): a graph whose decode runs on another backend than its prefill
	// (multinode decode on LeaderWorkerSets, single-node prefill on Deployments) gets its
	// decode workload before its prefill one, as byRole orders every other write.
	for _, b := range order {
		pool := *pools[b]
		if !mayCreate(v.backend(b), pool, existing) {
			continue
		}
		w := Write{Op: Ensure, Backend: b, Pool: pool, From: c.goalDGD, Expect: map[string]int32{}, Progress: true}
		for _, sw := range pool.Services {
			name := v.name(b, sw.Key)
			if sw.Replicas > 0 {
				w.Expect[name] = sw.Replicas
			}
			created = append(created, Workload{Backend: b, Workload: backends.Workload{Key: sw.Key, Kind: b, Name: name, Replicas: sw.Replicas}})
			w.Say = append(w.Say, fmt.Sprintf("created %s at %d", name, sw.Replicas))
		}
		d.write(w)
	}
	return created
}

// missingPools are the goal revision's workloads to create, by backend, and the
// backends in the order their first service comes in (decode first).
func missingPools(v *view, c course, plan planner.Plan, existing map[backends.Key]Workload) (map[string]*backends.Pool, []string) {
	pools := map[string]*backends.Pool{}
	var order []string
	for _, name := range rolledByRole(v, c) {
		key := backends.Key{Service: name, Hash: c.h.goalHash()}
		b := v.backendOf[name]
		t := target(c.h, plan, key, 0)
		if _, ok := existing[key]; (ok || t == 0) && !b.HoldsPools {
			continue
		}
		if b.HoldsPools && c.goalDGD.Spec.Services[name].DesiredReplicas() == 0 {
			continue // no clique for a worker at zero (its revision hash says so: revisions.WorkerTemplate.Zero)
		}
		if pools[b.Kind] == nil {
			pools[b.Kind] = &backends.Pool{Hash: key.Hash}
			order = append(order, b.Kind)
		}
		svc := c.goalDGD.Spec.Services[name]
		pools[b.Kind].Services = append(pools[b.Kind].Services, backends.ServiceWorkload{
			Key: key, Spec: svc, Replicas: t, InPlace: !svc.IsWorker()})
	}
	return pools, order
}

// mayCreate reports whether the missing workloads of pool may be created now. A
// backend that HoldsPools holds the goal revision's workloads in one object made whole
// at once: not before the plan grows some service (the pool lists every worker service
// of the backend, growing or not), and not while any of the pool's workloads still
// exists (its object is being deleted: the pass after it is gone makes it again; a
// live one can take no new service).
func mayCreate(b backends.Description, pool backends.Pool, existing map[backends.Key]Workload) bool {
	if !b.HoldsPools {
		return len(pool.Services) > 0
	}
	grows := false
	for _, sw := range pool.Services {
		if _, ok := existing[sw.Key]; ok {
			return false
		}
		grows = grows || sw.Replicas > 0
	}
	return grows
}

// rolledByRole lists the services the planner moves (rolledServices) a cohort's
// frontends first, then decode, prefill last: the order in which a new revision's
// workloads are created (see byRole).
func rolledByRole(v *view, c course) []string {
	var ws []Workload
	for _, name := range c.rolledServices(v) {
		ws = append(ws, Workload{Workload: backends.Workload{Key: backends.Key{Service: name}}})
	}
	var out []string
	for _, w := range byRole(c.goalDGD, ws, true) {
		out = append(out, w.Service)
	}
	return out
}

// cleanup deletes the workloads of old revisions once their whole pool is drained:
// every workload at zero replicas, reporting none, and no pod left (terminating ones
// included: a workload's own status stops counting a pod as soon as it terminates).
func cleanup(v *view, c course, plan planner.Plan, d *draft) {
	goal := c.h.goalHash()
	drained := map[string]bool{}
	for _, w := range v.Workloads {
		if w.Hash == "" || w.Hash == goal {
			continue
		}
		if _, seen := drained[w.Hash]; !seen {
			drained[w.Hash] = true
		}
		if v.targetOf(c.h, plan, w) > 0 || w.Pods > 0 || w.Current > 0 {
			drained[w.Hash] = false
		}
	}
	for _, w := range v.Workloads {
		if w.Hash != "" && drained[w.Hash] && !w.Terminating {
			deleteWorkload(v, d, w, fmt.Sprintf("revision %d is drained", c.h.number(w.Hash)))
		}
	}
}

// result is the state a pass leaves, which the status reports: every workload at the
// replicas the pass set, ready counted up to those replicas (a replica being removed is
// not counted on), workloads it created (the plan's and the prelude's, m.created, and
// updateCohortFronts', d.made), none it deleted. Reporting the result rather
// than the input means the passes that only see their own writes arrive in the cache
// find nothing new to write: one status write per step.
func result(v *view, c course, m moves, d *draft) []Workload {
	var out []Workload
	for _, w := range v.Workloads {
		switch {
		case d.deleted[groupOf(w.Workload)] || w.Terminating:
			// Going: no replicas, but its pods still count until they are gone.
			w.Terminating, w.Replicas, w.Ready = true, 0, 0
		case w.Hash != "":
			w.Replicas = max(v.targetOf(c.h, m.plan, w), min(v.dynamoFloor(w), w.Replicas))
			w.Ready = min(w.Ready, w.Replicas)
		}
		out = append(out, w)
	}
	return append(append(out, m.created...), d.made...)
}
