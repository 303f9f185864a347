package controllers

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/controllers/planner"
	"github.com/dgd-rollout/operator/controllers/steps"
	"github.com/dgd-rollout/operator/revisions"
)

// runSteps decides, for a DGD with spec.rollout.steps, the hold of this pass (p.hold):
// the step machine (package steps) runs on the observed workloads with the planner's
// phase for each candidate hold, the step state the status recorded for the same worker
// rollout, the clock, the user's promotion (AnnotationPromote) and the measurements of
// an analysis step. When the machine says metrics are due, they are measured (the one
// impure part: Prometheus queries) and the machine runs again with them. Without steps
// it leaves p.hold nil and the spec's partition and paused apply as they are; an
// aborted rollout runs no step.
func (p *pass) runSteps(ctx context.Context) error {
	ro := p.dgd.RolloutOrDefault()
	if len(ro.Steps) == 0 || p.abort != nil {
		return nil
	}
	list, err := stepsOf(ro.Steps, p.dgd.WorkerServiceNames())
	if err != nil {
		return err
	}
	state := steps.State{Start: p.now}
	var recorded []v1alpha1.AnalysisStatus
	if ru := p.old.RollingUpdate; ru != nil && ru.CurrentStepIndex != nil && p.sameRollout() && !p.retried {
		state.Index = int(*ru.CurrentStepIndex)
		if ru.CurrentStepStartTime != nil {
			state.Start = ru.CurrentStepStartTime.Time
		}
		recorded = ru.Analyses
	}
	rollback := p.rollbackToStable()
	if rollback && p.old.RollingUpdate != nil && !p.sameRollout() {
		p.event("Normal", v1alpha1.EventRolloutStepsSkipped, fmt.Sprintf("revision %d has the workers of the stable revision %s: they return without the steps", p.revs.Update.Revision, p.revs.Current.Name))
	}
	workers := p.workers()
	in := steps.Input{
		Steps: list, State: state, Now: p.now,
		Promotion:     p.promotion(),
		NothingToRoll: !p.hasOldWorkers() || rollback,
		Phase: func(partition *planner.IntOrPercent, paused bool) planner.Phase {
			in := p.inputFrom(workers)
			in.Spec.Partition, in.Spec.Paused = partition, paused || ro.Paused
			return planner.Compute(in).Phase
		},
	}
	book := newAnalysisBook(recorded)
	in.Tallies = book.tallies(state)
	var out steps.Output
	var ended []string
	for range len(list) + 1 { // each run measures one analysis step; a step never runs twice
		out = steps.Run(in)
		ended = append(ended, out.Ended...)
		book.judged(out.Analyses)
		if len(out.Due) == 0 {
			break
		}
		p.measure(ctx, book, out.State, out.Due)
		in.State, in.Tallies = out.State, book.tallies(out.State)
	}
	out.Ended = ended
	out.State.Start = out.State.Start.Truncate(time.Second) // as status.rollingUpdate stores it
	p.hold = &out
	p.analyses = book.statuses()
	for _, e := range out.Ended {
		p.event("Normal", v1alpha1.EventRolloutStepEnded, fmt.Sprintf("revision %d: %s", p.revs.Update.Revision, e))
	}
	for _, j := range book.finished() {
		switch j.Phase {
		case v1alpha1.AnalysisSuccessful:
			p.event("Normal", v1alpha1.EventAnalysisSucceeded, fmt.Sprintf("revision %d: step %d of %d: %s", p.revs.Update.Revision, j.Step+1, len(list), j.Message))
		case v1alpha1.AnalysisInconclusive:
			p.event("Warning", v1alpha1.EventAnalysisInconclusive, fmt.Sprintf("revision %d: step %d of %d: %s; the rollout holds: promote or abort it", p.revs.Update.Revision, j.Step+1, len(list), j.Message))
		}
	}
	if out.Abort != "" {
		p.startAbort(v1alpha1.ReasonAnalysisFailed, fmt.Sprintf("step %d of %d: %s", out.State.Index+1, len(list), out.Abort))
		return nil
	}
	if !out.RequeueAt.IsZero() {
		p.requeueIn(out.RequeueAt.Sub(p.now) + 100*time.Millisecond)
	}
	return nil
}

// stepsOf converts spec.rollout.steps for the step machine, defaults applied, and
// reports what admission cannot check as InvalidSpec naming the field: a malformed
// step partition, a partition that rises, a condition that is not CEL over result
// yielding a bool, a query that is not a template over the analysis variables.
func stepsOf(spec []v1alpha1.RolloutStep, workers []string) ([]steps.Step, error) {
	list := make([]steps.Step, len(spec))
	for i, s := range spec {
		switch {
		case s.Partition != nil && !validPartition(*s.Partition):
			return nil, &invalidSpecError{msg: fmt.Sprintf("spec.rollout.steps[%d].partition: %q must be a non-negative integer or a percentage from 0%% to 100%%", i, s.Partition.String())}
		case s.Partition != nil:
			list[i] = steps.Step{Partition: toIntOrPercent(s.Partition)}
		case s.Pause != nil:
			list[i] = steps.Step{Pause: true}
			if s.Pause.Duration != nil {
				d := s.Pause.Duration.Duration
				list[i].Duration = &d
			}
		case s.Analysis != nil:
			for j, m := range s.Analysis.Metrics {
				field := fmt.Sprintf("spec.rollout.steps[%d].analysis.metrics[%d]", i, j)
				for _, c := range []struct{ name, expr string }{{"successCondition", m.SuccessCondition}, {"failureCondition", m.FailureCondition}} {
					if c.expr == "" {
						continue
					}
					if err := analysis.CheckCondition(c.expr); err != nil {
						return nil, &invalidSpecError{msg: fmt.Sprintf("%s.%s: %q is not a CEL condition over result (a double): %v", field, c.name, c.expr, err)}
					}
				}
				if err := analysis.CheckQuery(m.Query, workers); err != nil {
					return nil, &invalidSpecError{msg: fmt.Sprintf("%s.query: %v", field, err)}
				}
				list[i].Analysis = append(list[i].Analysis, metricOf(m))
			}
		}
	}
	if i, prev := steps.Raises(list); i >= 0 {
		return nil, &invalidSpecError{msg: fmt.Sprintf("spec.rollout.steps[%d].partition: %s raises the partition of an earlier step (%s): a canary only moves forward",
			i, spec[i].Partition.String(), showPartition(prev))}
	}
	return list, nil
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

// measure queries every due metric of the analysis step at state and records the
// measurements in book.
func (p *pass) measure(ctx context.Context, book *analysisBook, state steps.State, due []analysis.Metric) {
	q := p.r.Analysis
	if q == nil {
		q = analysis.NoPrometheus{}
	}
	vars := p.analysisVars()
	for _, m := range due {
		query, err := analysis.Render(m.Query, vars)
		r := analysis.Result{Err: err}
		if err == nil {
			r = q.Query(ctx, query, p.now)
		}
		meas := analysis.Evaluate(m, r, p.now)
		book.add(state, m.Name, meas)
		AnalysisMeasurements.WithLabelValues(p.dgd.Namespace, p.dgd.Name, string(meas.Phase)).Inc()
		log.FromContext(ctx).V(1).Info("measured", "metric", m.Name, "query", query, "phase", meas.Phase, "value", meas.Value, "message", meas.Message)
	}
}

// analysisVars are the template variables of this pass's queries: the update revision
// as the canary, the revision every worker was on before the rollout as the stable.
func (p *pass) analysisVars() analysis.Vars {
	rev := func(r *appsv1.ControllerRevision) analysis.Revision {
		if r == nil {
			return analysis.Revision{Workloads: map[string]string{}}
		}
		hash := revisions.HashOf(r)
		w := map[string]string{}
		for _, name := range p.dgd.WorkerServiceNames() {
			w[name] = p.backendOf[name].Name(p.dgd, backends.Key{Service: name, Hash: hash})
		}
		return analysis.NewRevision(r.Revision, hash, backends.EffectiveNamespace(p.dgd, true, hash), w)
	}
	return analysis.Vars{Namespace: p.dgd.Namespace, Name: p.dgd.Name, Canary: rev(p.revs.Update), Stable: rev(p.revs.Current)}
}

// sameRollout reports whether the status describes a rollout to the workers of the
// update revision (a revision that changes only stable services continues it).
func (p *pass) sameRollout() bool {
	return p.old.RollingUpdate != nil && p.old.UpdateWorkerHash == p.updateHash()
}

// rollbackToStable reports whether the spec went back to the workers every worker was
// on before the rollout (an undo during a canary): they return at once, as Argo
// Rollouts skips the steps of a rollback to its stable ReplicaSet.
func (p *pass) rollbackToStable() bool {
	return p.revs.Current != nil && revisions.HashOf(p.revs.Current) == p.updateHash() && p.hasOldWorkers()
}

// promotion reads AnnotationPromote for the update revision: "<revision>/<step>" (1-based
// as kubectl dgd prints steps) or "<revision>/full"; anything else promotes nothing.
func (p *pass) promotion() steps.Promotion {
	none := steps.Promotion{Through: -1}
	rev, what, ok := strings.Cut(p.dgd.Annotations[v1alpha1.AnnotationPromote], "/")
	if !ok || rev != strconv.FormatInt(p.revs.Update.Revision, 10) {
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
