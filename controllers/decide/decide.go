package decide

import (
	"errors"
	"time"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/planner"
)

// Decide decides one pass of one DGD from its snapshot, and is pure: the same snapshot
// always gives the same decision, and nothing outside it is read or written. It reads
// as the pass runs (see the package doc): the spec checked, the cache's freshness, the
// history, the objects the pods need, the stable services, the abort, the steps, the
// goal, the plan and its writes, the Services, what the pass leaves and its status;
// then no write is made until every name it creates an object under is free or the
// DGD's (claim).
func Decide(s *Snapshot) Decision {
	return claim(s, decideAll(s))
}

// decideAll decides the pass's writes and status, before claim checks the names.
func decideAll(s *Snapshot) Decision {
	d := newDraft()
	v, invalid := newView(s, &d.Needs)
	switch {
	case invalid != "":
		return stop(s, d, v1alpha1.ReasonInvalidSpec, invalid)
	case s.Stale != "":
		return Decision{Wait: s.Stale, Metrics: d.Metrics}
	}
	if msg := dynamoUnsupported(s); msg != "" {
		d.requeueIn(DynamoRecheck)
		return stop(s, d, v1alpha1.ReasonDynamoTakeOverUnsupported, msg)
	}
	if msg := dynamoGroveBlocked(s); msg != "" {
		d.requeueIn(DynamoRecheck)
		return stop(s, d, v1alpha1.ReasonDynamoTakeOverUnsupported, msg)
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
	v.form = resolveForm(v, h)
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
	updateCohortFronts(v, c, d)
	v.form.unservable = unservable(v)
	hold, made := prelude(v, h, d)
	m, err := moveWorkers(v, c, hold, d)
	m.created = append(made, m.created...)
	var bad *invalidSpec
	switch {
	case errors.As(err, &bad):
		return stop(v.Snapshot, d, v1alpha1.ReasonInvalidSpec, bad.msg)
	case err != nil:
		return failed(d, err)
	}
	res := result(v, c, m, d)
	l := leaves{c: c, a: a, steps: st, res: res, after: planner.Compute(c.input(v, res)), traffic: m.traffic, hold: m.hold}
	services(v, h, res, m.traffic, d)
	unsched := unschedulable(v, h, res, d)
	if d.Needs.Any() {
		return Decision{Needs: d.Needs}
	}
	d.Status = status(v, l, unsched, d)
	pruneNext(v, h, d)
	d.report = report{dgd: v.dgd, now: v.Now, conflicts: d.conflicts}
	return d.Decision
}

// pruneNext asks for another pass soon when this one moves the current revision while
// the history holds more old revisions than its limit: the revision that was current
// ages out only once the status names another (revisions.PlanSync keeps the current
// one), and the status write starts no pass. Without it, an operator killed between a
// rollout's last workload write and its status write (the crash suite's kill inside
// the cleanup pass) restarts into a pass that finds the old workloads gone, writes the
// status, and hears no event after it: the history stayed one revision over its limit.
func pruneNext(v *view, h *history, d *draft) {
	if d.Status.CurrentRevision != v.dgd.Status.CurrentRevision && len(h.plan.Revisions) > int(max(v.dgd.HistoryLimit(), 0))+1 {
		d.requeueIn(pruneAfter)
	}
}

// pruneAfter is how soon pruneNext's pass comes: after the status write, which the
// next pass reads past the cache if need be (controllers' fresh).
const pruneAfter = 100 * time.Millisecond

// status is the status the pass leaves: counts, revisions, the rolling update, the
// restart and the conditions.
func status(v *view, l leaves, unsched map[string]string, d *draft) *v1alpha1.DynamoGraphDeploymentStatus {
	st := v.dgd.Status.DeepCopy()
	st.ObservedGeneration = v.dgd.Generation
	counts(v, l.c.h, l.res, unsched, st, d)
	revisionsOf(l.c.h, l.a.abort != nil, l.after.Done, st)
	rollingUpdate(v, l, st, d)
	restart(v, l, st, d)
	conditions(v, l, st, d)
	st.Cohorts, st.Traffic = cohortStatuses(v, l.traffic, l.res, d)
	return st
}

// failed is the Decision of a pass that cannot go on for a reason a retry may fix: the
// writes decided so far, then err.
func failed(d *draft, err error) Decision {
	d.Err = err
	return d.Decision
}
