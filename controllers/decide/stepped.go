package decide

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/controllers/planner"
	"github.com/dgd-rollout/operator/controllers/steps"
	"github.com/dgd-rollout/operator/revisions"
)

// runSteps decides, for a DGD with spec.rollout.steps, the hold of this pass: the step
// machine (package steps) runs on the observed workloads with the planner's phase for
// each candidate hold, the step state the status recorded for the same worker rollout,
// the clock, the user's promotion (AnnotationPromote) and the measurements of an
// analysis step. When the machine says metrics are due, the results the snapshot holds
// for them are recorded and the machine runs again with them; a result the snapshot
// lacks is listed as due (Decision.Measure) and the step holds as it is until a later
// pass has it: no pass waits for Prometheus. Without steps
// the hold is nil and the spec's partition and paused apply as they are; an aborted
// rollout runs no step. A failed analysis aborts the rollout (a.abort).
func runSteps(v *view, h *history, a *attempt, d *draft) (stepped, error) {
	ro := v.dgd.RolloutOrDefault()
	if len(ro.Steps) == 0 || a.abort != nil {
		return stepped{}, nil
	}
	list, err := stepsOf(ro.Steps, v.dgd.Namespace, v.AnalysisTemplates, v.dgd.WorkerServiceNames(), workerReplicas(v.dgd))
	if err != nil {
		return stepped{}, err
	}
	in, book := stepsInput(v, h, *a, list, d)
	out, ended, ok := runMachine(v, h, *a, in, book, d)
	if !ok {
		return stepped{}, nil // workload names needed: the pass decides again with them
	}
	out.Ended = ended
	out.State.Start = out.State.Start.Truncate(time.Second) // as status.rollingUpdate stores it
	stepEvents(h, d, out, book, len(list))
	if out.Abort != "" {
		a.abort = startAbort(v, h, d, v1alpha1.ReasonAnalysisFailed, fmt.Sprintf("step %d/%d: %s", out.State.Index+1, len(list), out.Abort))
		return stepped{hold: &out, analyses: book.statuses(), count: len(list)}, nil
	}
	if !out.RequeueAt.IsZero() {
		d.requeueIn(out.RequeueAt.Sub(v.Now) + 100*time.Millisecond)
	}
	if len(d.Measure) > 0 {
		// A landing result starts a pass (the runner enqueues the DGD); this one comes
		// if nothing else does, once every query has had its time.
		d.requeueIn(MeasureRecheck)
	}
	return stepped{hold: &out, analyses: book.statuses(), count: len(list)}, nil
}

// stepsInput is the step machine's input: the steps, where the status says the
// rollout is in them (from the first step on a new rollout or a retry), the promotion,
// whether anything rolls, and the planner's phase for a hold.
func stepsInput(v *view, h *history, a attempt, list []steps.Step, d *draft) (steps.Input, *analysisBook) {
	old := &v.dgd.Status
	state := steps.State{Start: v.Now}
	var recorded []v1alpha1.AnalysisStatus
	if ru := old.RollingUpdate; ru != nil && ru.CurrentStepIndex != nil && h.sameRollout(old) && !a.retried {
		state.Index = int(*ru.CurrentStepIndex)
		if ru.CurrentStepStartTime != nil {
			state.Start = ru.CurrentStepStartTime.Time
		}
		recorded = ru.Analyses
	}
	rollback := rollbackToStable(v, h)
	if rollback && old.RollingUpdate != nil && !h.sameRollout(old) {
		d.event("Normal", v1alpha1.EventRolloutStepsSkipped, fmt.Sprintf("revision %d has the workers of the stable revision %s: they return without the steps", h.update.Number, h.current.Name))
	}
	workers, paused := v.workers(), v.dgd.RolloutOrDefault().Paused
	c := course{h: h, goalDGD: v.dgd}
	in := steps.Input{
		Steps: list, State: state, Now: v.Now,
		Promotion:     promotion(v, h),
		NothingToRoll: !hasOldWorkers(v, h) || rollback,
		Phase: func(partition *planner.IntOrPercent, p bool) planner.Phase {
			in := c.input(v, workers)
			in.Spec.Partition, in.Spec.Paused = partition, p || paused
			return planner.Compute(in).Phase
		},
	}
	if v.form.cohorts {
		in.InEffect = func(weight *int32, header *steps.Header) bool { return trafficInEffect(v, h, weight, header) }
	}
	book := newAnalysisBook(recorded)
	in.Tallies = book.tallies(state)
	return in, book
}

// trafficInEffect reports whether the update revision's cohort has weight (or the
// header route) in effect for every frontend service, as its provider's objects show
// now (traffic.Effect's Weights and HeaderRoute, judged whatever split is asked), so
// that a setWeight or setHeaderRoute step ends once clients are routed so.
func trafficInEffect(v *view, h *history, weight *int32, header *steps.Header) bool {
	provider, _ := providerFor(v)
	if provider == nil {
		return false
	}
	for _, fe := range v.form.frontends {
		obs := v.Traffic[fe]
		obs.Now = v.Now
		e := provider.Effect(TrafficBase(v.dgd, fe, v.TrafficConfig), obs)
		if weight != nil && (e.Weights == nil || e.Weights[h.update.WorkerHash] != *weight) {
			return false
		}
		if hr := e.HeaderRoute; header != nil && (hr == nil || hr.Hash != h.update.WorkerHash) {
			return false
		}
	}
	return true
}

// workerReplicas are the desired replicas of dgd's worker services.
func workerReplicas(dgd *v1alpha1.DynamoGraphDeployment) map[string]int32 {
	out := map[string]int32{}
	for _, name := range dgd.WorkerServiceNames() {
		out[name] = dgd.Spec.Services[name].DesiredReplicas()
	}
	return out
}

// weightPartition is the partition a setWeight step of n percent holds: the largest
// percentage p that leaves at least ⌈R_s·n/100⌉ replicas of every worker service s on
// the new revision, so that its cohort's share of every service reaches n. The planner
// keeps round(R_s·p/100) on the old revision (PartitionCounts); p is chosen so that
// R_s·p/100 <= ⌊R_s·(100-n)/100⌋ for every s, hence the rounding never keeps more.
// Worked example: prefill 4, decode 2, setWeight 30: ⌊4·0.7⌋ = 2 (50%), ⌊2·0.7⌋ = 1
// (50%): p = 50%, the new pool holds 2 prefill and 1 decode, 50% of each >= 30%.
func weightPartition(n int32, replicas map[string]int32) *planner.IntOrPercent {
	p := 100 - n
	for _, r := range replicas {
		if r <= 0 {
			continue
		}
		keep := r * (100 - n) / 100
		p = min(p, keep*100/r)
	}
	return &planner.IntOrPercent{Value: p, Percent: true}
}

// runMachine runs the step machine until no measurement is due or none of those due
// has a result yet, each run recording what the snapshot holds of one analysis step
// (a step's metrics may take more than one run when some results are still out), and
// returns its last output and every step that ended; false when the queries need
// workload names first (Needs.Names). The measurements the last run found due without
// a result are the Decision's Measure.
func runMachine(v *view, h *history, a attempt, in steps.Input, book *analysisBook, d *draft) (steps.Output, []string, bool) {
	var out steps.Output
	var ended []string
	for range len(in.Steps) + len(v.Measurements) + 1 {
		out = steps.Run(in)
		ended = append(ended, out.Ended...)
		book.judged(out.Analyses)
		if len(out.Due) == 0 {
			break
		}
		recorded, due := measure(v, h, a, d, book, out.State, out.Due)
		if len(v.needs.Names) > 0 {
			return out, ended, false
		}
		if !recorded {
			d.Measure = due
			break
		}
		in.State, in.Tallies = out.State, book.tallies(out.State)
	}
	return out, ended, true
}

// stepEvents queues the Events of the steps that ended and the analyses that finished.
func stepEvents(h *history, d *draft, out steps.Output, book *analysisBook, count int) {
	for _, e := range out.Ended {
		d.event("Normal", v1alpha1.EventRolloutStepEnded, fmt.Sprintf("revision %d: %s", h.update.Number, e))
	}
	for _, j := range book.finished() {
		switch j.Phase {
		case v1alpha1.AnalysisSuccessful:
			d.event("Normal", v1alpha1.EventAnalysisSucceeded, fmt.Sprintf("revision %d: step %d/%d: %s", h.update.Number, j.Step+1, count, j.Message))
		case v1alpha1.AnalysisInconclusive:
			d.event("Warning", v1alpha1.EventAnalysisInconclusive, fmt.Sprintf("revision %d: step %d/%d: %s; the rollout holds: promote or abort it", h.update.Number, j.Step+1, count, j.Message))
		}
	}
}

// measure records, for every due metric of the analysis step at state, the
// measurement of the result the snapshot holds for it (a query that does not render
// is an Error measurement at once), and returns whether it recorded any and the
// measurements due that have no result yet. Nothing is measured while the queries
// need workload names (Needs.Names).
func measure(v *view, h *history, a attempt, d *draft, book *analysisBook, state steps.State, due []analysis.Metric) (bool, []MeasureNeed) {
	vars := analysisVars(v, h)
	if len(v.needs.Names) > 0 {
		return false, nil // the queries name the workloads
	}
	tallies := book.tallies(state)
	recorded := false
	var missing []MeasureNeed
	for _, m := range due {
		query, err := analysis.Render(m.Query, vars, m.Args)
		r := analysis.Result{Err: err}
		if err == nil {
			t := tallies[m.Name]
			key := Measure{Revision: h.update.Number, Attempt: a.number, Step: state.Index, Start: state.Start.Unix(),
				Metric: m.Name, Index: t.Count() + t.Errors, Query: query}
			answer, ok := v.Measurements[key]
			if !ok {
				missing = append(missing, MeasureNeed{Measure: key, At: v.Now})
				continue
			}
			r = answer
		}
		at := r.At
		if at.IsZero() {
			at = v.Now
		}
		meas := analysis.Evaluate(m, r, at)
		book.add(state, m.Name, meas)
		d.Measured = append(d.Measured, Measured{Metric: m.Name, Query: query, Measurement: meas})
		recorded = true
	}
	return recorded, missing
}

// MeasureRecheck is when a pass that left measurements due looks again if no result
// has started one: a query ends within analysis.QueryTimeout.
const MeasureRecheck = analysis.QueryTimeout + 2*time.Second

// analysisVars are the template variables of this pass's queries: the update revision
// as the canary, the revision every worker was on before the rollout as the stable.
func analysisVars(v *view, h *history) analysis.Vars {
	rev := func(r *revisions.Ref) analysis.Revision {
		if r == nil {
			return analysis.Revision{Workloads: map[string]string{}}
		}
		w := map[string]string{}
		for _, name := range v.dgd.WorkerServiceNames() {
			w[name] = v.name(v.backendOf[name].Kind, backends.Key{Service: name, Hash: r.WorkerHash})
		}
		return analysis.NewRevision(r.Number, r.WorkerHash, backends.EffectiveNamespace(v.dgd, true, r.WorkerHash), w)
	}
	var current *revisions.Ref
	if !h.current.IsZero() {
		current = &h.current
	}
	return analysis.Vars{Namespace: v.dgd.Namespace, Name: v.dgd.Name, Canary: rev(&h.update), Stable: rev(current)}
}

// rollbackToStable reports whether the spec went back to the workers every worker was
// on before the rollout (an undo during a canary): they return at once, as Argo
// Rollouts skips the steps of a rollback to its stable ReplicaSet.
func rollbackToStable(v *view, h *history) bool {
	return !h.current.IsZero() && h.current.WorkerHash == h.update.WorkerHash && hasOldWorkers(v, h)
}

// hasOldWorkers reports whether a worker workload of another revision than the update
// has replicas.
func hasOldWorkers(v *view, h *history) bool {
	for _, w := range v.workers() {
		if w.Hash != h.update.WorkerHash && w.Replicas > 0 {
			return true
		}
	}
	return false
}

// promotion reads AnnotationPromote for the update revision: "<revision>/<step>" (1-based
// as kubectl dgd prints steps) or "<revision>/full"; anything else promotes nothing.
func promotion(v *view, h *history) steps.Promotion {
	none := steps.Promotion{Through: -1}
	rev, what, ok := strings.Cut(v.dgd.Annotations[v1alpha1.AnnotationPromote], "/")
	if !ok || rev != strconv.FormatInt(h.update.Number, 10) {
		return none
	}
	if what == "full" {
		return steps.Promotion{Through: -1, Full: true}
	}
	n, err := strconv.Atoi(what)
	if err != nil || n < 1 {
		return none
	}
	return steps.Promotion{Through: n - 1}
}

// invalidSpec is a problem with the DGD's spec that no retry can fix.
type invalidSpec struct{ msg string }

func (e *invalidSpec) Error() string { return e.msg }

// stepsOf converts spec.rollout.steps for the step machine, defaults applied, and
// reports what admission cannot check as InvalidSpec naming the field: a malformed
// step partition, a partition that rises, a condition that is not CEL over result
// yielding a bool, a query that is not a template over the analysis variables, what
// the analysis templates a step references lack (AnalysisMetrics).
func stepsOf(spec []v1alpha1.RolloutStep, namespace string, templates Templates, workers []string, replicas map[string]int32) ([]steps.Step, error) {
	list := make([]steps.Step, len(spec))
	for i, s := range spec {
		st, err := stepOf(i, s, namespace, templates, workers, replicas)
		if err != nil {
			return nil, err
		}
		list[i] = st
	}
	if i, prev := steps.Raises(list); i >= 0 && spec[i].SetWeight != nil {
		return nil, &invalidSpec{msg: fmt.Sprintf("spec.rollout.steps[%d].setWeight: %d%% leaves more of the workers on the old revision than an earlier step (partition %s): a canary only moves forward",
			i, *spec[i].SetWeight, showPartition(prev))}
	} else if i >= 0 {
		return nil, &invalidSpec{msg: fmt.Sprintf("spec.rollout.steps[%d].partition: %s raises the partition of an earlier step (%s): a canary only moves forward",
			i, spec[i].Partition.String(), showPartition(prev))}
	}
	return list, nil
}

// stepOf converts step i.
func stepOf(i int, s v1alpha1.RolloutStep, namespace string, templates Templates, workers []string, replicas map[string]int32) (steps.Step, error) {
	switch {
	case s.SetWeight != nil:
		return steps.Step{Partition: weightPartition(*s.SetWeight, replicas), Weight: ptr.To(*s.SetWeight)}, nil
	case s.SetHeaderRoute != nil:
		return steps.Step{Header: &steps.Header{Name: s.SetHeaderRoute.Name, Value: s.SetHeaderRoute.Value}}, nil
	case s.Partition != nil && !validPartition(*s.Partition):
		return steps.Step{}, &invalidSpec{msg: fmt.Sprintf("spec.rollout.steps[%d].partition: %q must be a non-negative integer or a percentage from 0%% to 100%%", i, s.Partition.String())}
	case s.Partition != nil:
		return steps.Step{Partition: toIntOrPercent(s.Partition)}, nil
	case s.Pause != nil:
		st := steps.Step{Pause: true}
		if s.Pause.Duration != nil {
			dur := s.Pause.Duration.Duration
			st.Duration = &dur
		}
		return st, nil
	case s.Analysis != nil:
		metrics, err := AnalysisMetrics(i, s.Analysis, namespace, templates, workers)
		return steps.Step{Analysis: metrics}, err
	}
	return steps.Step{}, nil
}

// checkMetric reports a metric's conditions that are not CEL over result and a query
// that is not a template over the analysis variables and args.
func checkMetric(field string, m v1alpha1.AnalysisMetric, workers []string, args map[string]string) error {
	for _, c := range []struct{ name, expr string }{{"successCondition", m.SuccessCondition}, {"failureCondition", m.FailureCondition}} {
		if c.expr == "" {
			continue
		}
		if err := analysis.CheckCondition(c.expr); err != nil {
			return &invalidSpec{msg: fmt.Sprintf("%s.%s: %q is not a CEL condition over result (a double): %v", field, c.name, c.expr, err)}
		}
	}
	if err := analysis.CheckQuery(m.Query, workers, args); err != nil {
		return &invalidSpec{msg: fmt.Sprintf("%s.query: %v", field, err)}
	}
	return nil
}

// metricOf is a metric of the spec with its defaults.
func metricOf(m v1alpha1.AnalysisMetric) analysis.Metric {
	return analysis.Metric{Name: m.Name, Query: m.Query, SuccessCondition: m.SuccessCondition, FailureCondition: m.FailureCondition,
		Interval:              ptr.Deref(m.Interval, metav1.Duration{Duration: analysis.DefaultInterval}).Duration,
		InitialDelay:          ptr.Deref(m.InitialDelay, metav1.Duration{}).Duration,
		Count:                 ptr.Deref(m.Count, analysis.DefaultCount),
		FailureLimit:          ptr.Deref(m.FailureLimit, 0),
		InconclusiveLimit:     ptr.Deref(m.InconclusiveLimit, 0),
		ConsecutiveErrorLimit: ptr.Deref(m.ConsecutiveErrorLimit, analysis.DefaultConsecutiveErrorLimit)}
}

var stepPercent = regexp.MustCompile(`^(100|[1-9]?[0-9])%$`)

// validPartition is the rule spec.rollout.partition's CEL rule checks, for a step.
func validPartition(v intstr.IntOrString) bool {
	if v.Type == intstr.Int {
		return v.IntVal >= 0
	}
	return stepPercent.MatchString(v.StrVal)
}

func showPartition(v *planner.IntOrPercent) string {
	if v.Percent {
		return fmt.Sprintf("%d%%", v.Value)
	}
	return strconv.Itoa(int(v.Value))
}
