package decide

import (
	"errors"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/planner"
)

// Decide decides one pass of one DGD from its snapshot, and is pure: the same snapshot
// always gives the same decision, and nothing outside it is read or written. It reads
// as the pass runs (see the package doc): the spec checked, the cache's freshness, the
// history, the objects the pods need, the stable services, the abort, the steps, the
// goal, the plan and its writes, the Services, what the pass leaves and its status.
func Decide(s *Snapshot) Decision {
	d := newDraft()
	v, invalid := newView(s, &d.Needs)
	switch {
	case invalid != "":
		return stop(s, d, v1alpha1.ReasonInvalidSpec, invalid)
	case s.Stale != "":
		return Decision{Wait: s.Stale, Metrics: d.Metrics}
	}
	if msg := dynamoActive(s); msg != "" {
		d.requeueIn(DynamoRecheck)
		return stop(s, d, v1alpha1.ReasonDynamoOperatorActive, msg)
	}
	relabel(v, d)
	h, err := syncHistory(v, d)
	if err != nil {
		return failed(d, err)
	}
	platform(v, d)
	ensureStable(v, d)
	a := resolveAbort(v, h, d)
	st, err := runSteps(v, h, &a, d)
	var bad *invalidSpec
	switch {
	case errors.As(err, &bad):
		return stop(s, d, v1alpha1.ReasonInvalidSpec, bad.msg)
	case d.Needs.Any():
		return Decision{Needs: d.Needs}
	}
	return decideWorkers(v, h, a, st, d)
}

// decideWorkers decides, once the steps have said what holds, the workers' writes, the
// Services and the status.
func decideWorkers(v *view, h *history, a attempt, st stepped, d *draft) Decision {
	g, goalDGD, err := goalOf(v, h, a)
	if err != nil {
		return failed(d, err)
	}
	h.goal = g
	c := course{h: h, goalDGD: goalDGD, aborted: a.abort != nil, hold: st.hold}
	m := moveWorkers(v, c, d)
	res := result(v, c, m, d)
	l := leaves{c: c, a: a, steps: st, res: res, after: planner.Compute(c.input(v, res))}
	services(v, h, res, d)
	unsched := unschedulable(v, h, res, d)
	if d.Needs.Any() {
		return Decision{Needs: d.Needs}
	}
	d.Status = status(v, l, unsched, d)
	d.report = report{dgd: v.dgd, now: v.Now, conflicts: d.conflicts}
	return d.Decision
}

// status is the status the pass leaves: counts, revisions, the rolling update and the
// conditions.
func status(v *view, l leaves, unsched map[string]string, d *draft) *v1alpha1.DynamoGraphDeploymentStatus {
	st := v.dgd.Status.DeepCopy()
	st.ObservedGeneration = v.dgd.Generation
	counts(v, l.c.h, l.res, unsched, st, d)
	revisionsOf(l.c.h, l.a.abort != nil, l.after.Done, st)
	rollingUpdate(v, l, st, d)
	conditions(v, l, st, d)
	return st
}

// failed is the Decision of a pass that cannot go on for a reason a retry may fix: the
// writes decided so far, then err.
func failed(d *draft, err error) Decision {
	d.Err = err
	return d.Decision
}
