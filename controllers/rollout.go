package controllers

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/planner"
)

// rollout asks the planner for this pass's replica targets and applies them: every
// decrease first, then every increase (creating missing workloads of the update
// revision), so that surge and availability hold between the individual writes too.
func (p *pass) rollout(ctx context.Context) error {
	p.plan = planner.Compute(p.plannerInput())
	if err := p.applyDecreases(ctx); err != nil {
		return err
	}
	return p.applyIncreases(ctx)
}

func (p *pass) plannerInput() planner.Input { return p.inputFrom(p.workers()) }

// inputFrom builds the planner's input from the spec and a set of worker workloads.
func (p *pass) inputFrom(workloads []observed) planner.Input {
	ro := p.dgd.RolloutOrDefault()
	in := planner.Input{
		Spec: planner.Spec{
			Strategy:  planner.Strategy(ro.Strategy),
			Paused:    ro.Paused,
			Partition: toIntOrPercent(ro.Partition),
		},
		UpdateRevision: p.revisionOf(p.goalHash()),
	}
	switch {
	case p.abort != nil: // back to the stable revision: no partition or step holds it
		in.Spec.Partition = nil
	case p.hold != nil: // spec.rollout.steps: the step's hold (the spec's partition is unset)
		in.Spec.Partition, in.Spec.Paused = p.hold.Partition, ro.Paused || p.hold.Paused
	}
	seen := map[string]bool{}
	for _, name := range p.goalDGD.WorkerServiceNames() {
		svc := p.goalDGD.Spec.Services[name]
		in.Spec.Services = append(in.Spec.Services, planner.ServiceSpec{
			Name:           name,
			Role:           svc.Role(),
			Replicas:       svc.DesiredReplicas(),
			MaxSurge:       *toIntOrPercent(override(svc, v1alpha1.AnnotationMaxSurge, ro.MaxSurge)),
			MaxUnavailable: *toIntOrPercent(override(svc, v1alpha1.AnnotationMaxUnavailable, ro.MaxUnavailable)),
			UnreadyFirst:   backends.RemovesUnreadyFirst(p.backendOf[name]),
		})
		seen[name] = true
	}
	for _, w := range workloads {
		if w.Hash == "" {
			continue
		}
		if !seen[w.Service] { // a worker service removed from the spec drains with its pool
			seen[w.Service] = true
			in.Spec.Services = append(in.Spec.Services, planner.ServiceSpec{
				Name: w.Service, Role: v1alpha1.ComponentTypeWorker,
				MaxSurge: *toIntOrPercent(ro.MaxSurge), MaxUnavailable: *toIntOrPercent(ro.MaxUnavailable),
				UnreadyFirst: backends.RemovesUnreadyFirst(w.backend),
			})
		}
		in.Workloads = append(in.Workloads, planner.Workload{
			Service:  w.Service,
			Revision: p.revisionOf(w.Hash),
			Spec:     w.Replicas,
			Current:  max(w.Current, w.pods),
			Ready:    min(w.Ready, w.Replicas),
		})
	}
	return in
}

// workers are the observed worker workloads (every revision).
func (p *pass) workers() []observed {
	var out []observed
	for _, w := range p.workloads {
		if w.Hash != "" {
			out = append(out, w)
		}
	}
	return out
}

// byRole orders writes so that a crash between two writes of one step never leaves a
// pool with prefill but no decode (prefill needs a decode worker to hand its KV cache
// to; a decode worker alone can serve). grow orders decode first, a shrink prefill first.
func (p *pass) byRole(ws []observed, grow bool) []observed {
	rank := func(service string) int {
		role := v1alpha1.ComponentTypeWorker
		if svc := p.goalDGD.Spec.Services[service]; svc != nil {
			role = svc.Role()
		}
		r := map[string]int{v1alpha1.ComponentTypeDecode: 0, v1alpha1.ComponentTypeWorker: 1, v1alpha1.ComponentTypePrefill: 2}[role]
		if !grow {
			r = -r
		}
		return r
	}
	sort.SliceStable(ws, func(i, j int) bool { return rank(ws[i].Service) < rank(ws[j].Service) })
	return ws
}

// revisionOf is the ControllerRevision number of a worker hash; a workload whose
// revision was deleted counts as the oldest (0), so it drains last-but-safely.
func (p *pass) revisionOf(hash string) int64 {
	switch {
	case hash == p.updateHash():
		return p.revs.Update.Revision
	case p.goal != nil && hash == p.goalHash():
		return p.goal.Revision
	}
	return p.revNumber[hash]
}

// target is the planned replica count of a workload, or def when the plan has none.
func (p *pass) target(k backends.Key, def int32) int32 {
	rev := p.revisionOf(k.Hash)
	for _, t := range p.plan.Targets {
		if t.Service == k.Service && t.Revision == rev {
			return t.Replicas
		}
	}
	return def
}

// applyDecreases scales workloads down. An old revision whose every workload the plan
// takes to zero is deleted instead: its pods go exactly as they would at zero (their
// terminating pods still count against surge until gone, see countPods), and the
// revision is gone in one write per workload rather than a scale to zero and, a step
// later, a delete. A revision held in one object (a Grove PodCliqueSet) is deleted
// whole, never scaled to zero clique by clique, which Grove reports as lost replicas
// and arms gang termination for.
func (p *pass) applyDecreases(ctx context.Context) error {
	drains := p.drainedGroups()
	for _, w := range p.byRole(p.workers(), false) {
		if w.Terminating {
			continue
		}
		if drains[groupOf(w)] || p.target(w.Key, w.Replicas) < w.Replicas {
			if err := p.announceRecreate(ctx, w); err != nil {
				return err
			}
		}
		if drains[groupOf(w)] {
			if err := p.delete(ctx, w, fmt.Sprintf("revision %d drained", p.revisionOf(w.Hash))); err != nil {
				return err
			}
			continue
		}
		if t := p.target(w.Key, w.Replicas); t < w.Replicas {
			if err := p.scale(ctx, w, t); err != nil {
				return err
			}
		}
	}
	return nil
}

// announceRecreate writes Ready=False (ReasonRecreating) before the first write of a
// Recreate rollout that takes an old revision's pods away, when the DGD still reports
// Ready: the status of the pass comes only after its writes, and a whole Grove
// PodCliqueSet deleted, or its discovery Services pruned, leaves the graph unroutable
// before then. Once per rollout: the next pass finds Ready already False.
func (p *pass) announceRecreate(ctx context.Context, w observed) error {
	if p.dgd.RolloutOrDefault().Strategy != v1alpha1.RecreateStrategy || w.Hash == "" || w.Hash == p.goalHash() ||
		!meta.IsStatusConditionTrue(p.dgd.Status.Conditions, v1alpha1.ConditionReady) {
		return nil
	}
	meta.SetStatusCondition(&p.dgd.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonRecreating,
		Message:            fmt.Sprintf("Recreate: revision %d is taken down before revision %d starts", p.revisionOf(w.Hash), p.revisionOf(p.goalHash())),
		ObservedGeneration: p.dgd.Generation, LastTransitionTime: metav1.NewTime(p.now),
	})
	return p.updateStatus(ctx)
}

// drainedGroups lists the objects (by groupOf) of the old revisions whose every live
// workload the plan takes to zero.
func (p *pass) drainedGroups() map[string]bool {
	update := p.goalHash()
	drained := map[string]bool{} // worker hash -> every live workload at zero
	for _, w := range p.workers() {
		if w.Terminating {
			continue
		}
		d, seen := drained[w.Hash]
		drained[w.Hash] = (d || !seen) && w.Hash != update && p.target(w.Key, w.Replicas) == 0
	}
	// Under Recreate a Deployment or LeaderWorkerSet is scaled to zero first and deleted
	// once drained (cleanup): the new revision starts when the old reports no pods, a
	// wait that then never rests on the pod list alone.
	recreate := p.dgd.RolloutOrDefault().Strategy == v1alpha1.RecreateStrategy
	out := map[string]bool{}
	for _, w := range p.workers() {
		if !w.Terminating && drained[w.Hash] && (!recreate || w.Group != nil) {
			out[groupOf(w)] = true
		}
	}
	return out
}

// applyIncreases scales up existing workloads of the plan and creates the update
// revision's missing workloads (one Ensure per backend, so a backend that keeps a whole
// revision in one object sees the pool together).
func (p *pass) applyIncreases(ctx context.Context) error {
	existing := map[backends.Key]observed{}
	for _, w := range p.byRole(p.workers(), true) {
		existing[w.Key] = w
		if w.Terminating {
			continue // gone before it is made again: the pass after its deletion creates it
		}
		if t := p.target(w.Key, w.Replicas); t > w.Replicas {
			if err := p.scale(ctx, w, t); err != nil {
				return err
			}
		}
	}
	pools := map[backends.Backend]*backends.Pool{}
	var order []backends.Backend
	for _, name := range p.workerNamesByRole() {
		key := backends.Key{Service: name, Hash: p.goalHash()}
		b := p.backendOf[name]
		t := p.target(key, 0)
		if _, ok := existing[key]; (ok || t == 0) && !backends.HoldsPools(b) {
			continue
		}
		if backends.HoldsPools(b) && p.goalDGD.Spec.Services[name].DesiredReplicas() == 0 {
			continue // no clique for a worker at zero (its revision hash says so: revisions.WorkerTemplate.Zero)
		}
		if pools[b] == nil {
			pools[b] = &backends.Pool{Hash: key.Hash}
			order = append(order, b)
		}
		pools[b].Services = append(pools[b].Services, backends.ServiceWorkload{
			Key: key, Spec: p.goalDGD.Spec.Services[name], Replicas: t})
	}
	// The backends create in the order their first service comes in, decode first
	// (workerNamesByRole): a graph whose decode runs on another backend than its prefill
	// (multinode decode on LeaderWorkerSets, single-node prefill on Deployments) gets its
	// decode workload before its prefill one, as byRole orders every other write.
	for _, b := range order {
		if !p.mayCreate(b, *pools[b], existing) {
			continue
		}
		for _, sw := range pools[b].Services {
			wname := b.Name(p.dgd, sw.Key)
			if sw.Replicas > 0 {
				p.r.expected.expect(p.key(wname), sw.Replicas)
			}
			p.created = append(p.created, observed{backend: b, Workload: backends.Workload{Key: sw.Key, Kind: b.Kind(), Name: wname, Replicas: sw.Replicas}})
			p.wrote = append(p.wrote, fmt.Sprintf("created %s at %d", wname, sw.Replicas))
		}
	}
	for _, b := range order {
		if !p.mayCreate(b, *pools[b], existing) {
			continue
		}
		if err := b.Ensure(ctx, p.goalDGD, *pools[b]); err != nil {
			return err
		}
	}
	return nil
}

// mayCreate reports whether the missing workloads of pool may be created now. A
// PoolHolder backend holds the update revision's workloads in one object made whole
// at once: not before the plan grows some service (the pool lists every worker
// service of the backend, growing or not), and not while any of the pool's workloads
// still exists (its object is being deleted: the pass after it is gone makes it
// again; a live one can take no new service).
func (p *pass) mayCreate(b backends.Backend, pool backends.Pool, existing map[backends.Key]observed) bool {
	if !backends.HoldsPools(b) {
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

// workerNamesByRole lists the worker services decode first, prefill last: the order in
// which a new revision's workloads are created (see byRole).
func (p *pass) workerNamesByRole() []string {
	var ws []observed
	for _, name := range p.goalDGD.WorkerServiceNames() {
		ws = append(ws, observed{Workload: backends.Workload{Key: backends.Key{Service: name}}})
	}
	var out []string
	for _, w := range p.byRole(ws, true) {
		out = append(out, w.Service)
	}
	return out
}

// scale sets one workload's replicas and expects the cache to show them.
func (p *pass) scale(ctx context.Context, w observed, replicas int32) error {
	p.r.expected.expect(p.key(w.Name), replicas)
	if err := w.backend.Scale(ctx, p.dgd, w.Key, replicas); err != nil {
		p.r.expected.forget(p.key(w.Name))
		return err
	}
	p.wrote = append(p.wrote, fmt.Sprintf("scaled %s %d→%d", w.Name, w.Replicas, replicas))
	return nil
}

// override returns a service's rolling-update annotation when set, else def.
func override(svc *v1alpha1.DynamoComponentDeploymentSharedSpec, annotation string, def *intstr.IntOrString) *intstr.IntOrString {
	if v, ok := svc.Annotations[annotation]; ok && v != "" {
		parsed := intstr.Parse(v)
		return &parsed
	}
	return def
}

func toIntOrPercent(v *intstr.IntOrString) *planner.IntOrPercent {
	if v == nil {
		return nil
	}
	if v.Type == intstr.Int {
		return &planner.IntOrPercent{Value: v.IntVal}
	}
	var n int32
	_, _ = fmt.Sscanf(v.StrVal, "%d%%", &n)
	return &planner.IntOrPercent{Value: n, Percent: true}
}
