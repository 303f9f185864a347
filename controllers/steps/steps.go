// Package steps is the step machine of a stepped rollout (spec.rollout.steps): a pure
// function of the steps, where the rollout is in them, the clock, what the user
// promoted, the planner's view of a hold and the measurements of an analysis step. It
// decides which partition and pause the planner holds this pass, which metrics are due
// for a measurement, and whether an analysis aborts the rollout; the planner still
// decides every replica count, so each step keeps the invariants of any rollout.
//
// An analysis step holds like a pause (at the split the earlier steps reached) while
// its metrics are measured (package analysis judges them): it ends when every metric
// has passed, holds until promoted when one is inconclusive, and asks for an abort when
// one has failed. The caller takes the measurements Output.Due names and runs the
// machine again with them: both runs are pure.
package steps

import (
	"fmt"
	"strings"
	"time"

	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/controllers/planner"
)

// Step is one step: a partition to reach and hold, a pause, an analysis, a weight (a
// partition with a share of the traffic) or a header route.
type Step struct {
	// Partition is the split a partition step moves to; nil for a pause or an analysis.
	// A setWeight step has the partition that gives the new revision that share of
	// every worker service (the caller computes it).
	Partition *planner.IntOrPercent
	// Pause marks a pause step; Duration is its length, nil until promoted.
	Pause    bool
	Duration *time.Duration
	// Analysis, non-empty, makes an analysis step of these metrics.
	Analysis []analysis.Metric
	// Weight, set, makes a setWeight step: the percent of the traffic the new
	// revision's cohort takes from this step on (with Partition).
	Weight *int32
	// Header, set, makes a setHeaderRoute step: from it on, requests with the header go
	// to the new revision's cohort. It holds the split the earlier steps reached.
	Header *Header
}

// Header is a setHeaderRoute step's header and value.
type Header struct{ Name, Value string }

// holds reports whether the step holds the split the earlier steps reached (a pause,
// an analysis or a header route) rather than moving to a partition.
func (s Step) holds() bool { return s.Pause || len(s.Analysis) > 0 || s.Header != nil }

// State is where a rollout is in its steps: the step index (len(steps) once done) and
// when that step started.
type State struct {
	Index int
	Start time.Time
}

// Promotion is what the user promoted for this rollout: every step up to and including
// Through ends (-1: none), or, with Full, every step.
type Promotion struct {
	Through int
	Full    bool
}

// Input is everything a decision depends on.
type Input struct {
	Steps     []Step
	State     State
	Now       time.Time
	Promotion Promotion
	// NothingToRoll: no worker is on an old revision (a first deploy, a change of
	// stable services only, or the old workers are gone): there is no split to hold.
	NothingToRoll bool
	// Phase is the planner's phase for the observed state under a hold (the partition
	// and pause a step would hold). It must be a pure function of its arguments.
	Phase func(partition *planner.IntOrPercent, paused bool) planner.Phase
	// Tallies are the measurements recorded, by metric name, of the analysis step at
	// State.Index (a step reached later in this run starts with none).
	Tallies map[string]analysis.Tally
	// InEffect reports whether a weight (a setWeight step's) or a header route (a
	// setHeaderRoute step's) is in effect for the new revision's cohort; nil when the
	// DGD has no cohorts: a setWeight step then ends on its partition alone, a header
	// route at once.
	InEffect func(weight *int32, header *Header) bool
}

// Output is the hold for this pass.
type Output struct {
	State State
	// Partition and Paused are what the planner holds; both zero once the steps are done.
	Partition *planner.IntOrPercent
	Paused    bool
	// RequeueAt is when a timed pause ends (zero: no deadline).
	RequeueAt time.Time
	// Message says which step holds and why ("" once done).
	Message string
	// Ended lists the steps that ended this pass, in order, each with why.
	Ended []string
	// Analyses are the analysis steps judged this run, in order: those that ended
	// (passed, or promoted) and the one that holds, last.
	Analyses []Judged
	// Due are the metrics of the holding analysis step (State.Index) to measure now.
	Due []analysis.Metric
	// Abort, when set, says why the rollout must be aborted: a metric of the holding
	// analysis step failed.
	Abort string
	// Weight and Header are the traffic the hold asks for the new revision's cohort:
	// those of the last setWeight and setHeaderRoute steps at or before the step held
	// (nil: none, the weights follow the capacity); both nil once the steps are done.
	Weight *int32
	Header *Header
}

// Judged is an analysis step as judged in one run.
type Judged struct {
	Step  int
	Start time.Time
	// Phase is the step's (analysis.Combine of its metrics'); Message says why.
	Phase   analysis.Phase
	Message string
	// Metrics are the step's metrics' phases and messages, in the step's order.
	Metrics []JudgedMetric
	// Promoted: the step ended by promotion, whatever its phase.
	Promoted bool
}

// JudgedMetric is one metric's phase and why.
type JudgedMetric struct {
	Name    string
	Phase   analysis.Phase
	Message string
}

// Done reports whether every step is over.
func (o Output) Done(steps []Step) bool { return o.State.Index >= len(steps) }

// Run advances through every step whose hold is already over and returns the hold of
// the first that is not. A partition step is over once the planner reports its split
// reached and ready (or the rollout complete); a pause once its duration has passed
// since it started, or when promoted. Several steps may end in one pass.
func Run(in Input) Output {
	r := &run{in: in, st: in.State}
	if r.st.Index < 0 {
		r.st.Index = 0
	}
	switch {
	case r.st.Index >= len(in.Steps):
	case in.Promotion.Full:
		r.out.Ended = append(r.out.Ended, fmt.Sprintf("steps %d-%d/%d skipped: promoted in full", r.st.Index+1, len(in.Steps), len(in.Steps)))
		r.st.Index, r.st.Start = len(in.Steps), in.Now
	case in.NothingToRoll:
		r.st.Index, r.st.Start = len(in.Steps), in.Now
	}
	for r.st.Index < len(in.Steps) {
		if r.holdsAt() {
			r.out.Weight, r.out.Header = TrafficAt(in.Steps, r.st.Index)
			return r.out
		}
	}
	r.out.State = r.st
	return r.out
}

// TrafficAt is the weight and the header route held at step i: those of the last
// setWeight and setHeaderRoute steps at or before i (nil when none).
func TrafficAt(steps []Step, i int) (*int32, *Header) {
	var w *int32
	var h *Header
	for j := 0; j <= i && j < len(steps); j++ {
		if steps[j].Weight != nil {
			w = steps[j].Weight
		}
		if steps[j].Header != nil {
			h = steps[j].Header
		}
	}
	return w, h
}

// run is one run of the machine: where it is in the steps, and its output so far.
type run struct {
	in  Input
	st  State
	out Output
}

// end ends the step the run is at, for why, and starts the next now.
func (r *run) end(why string) {
	r.out.Ended = append(r.out.Ended, fmt.Sprintf("step %d/%d %s", r.st.Index+1, len(r.in.Steps), why))
	r.st.Index++
	r.st.Start = r.in.Now
}

// where names the step the run is at, 1-based: "step 2/3".
func (r *run) where() string { return fmt.Sprintf("step %d/%d", r.st.Index+1, len(r.in.Steps)) }

// holdsAt reports whether the step the run is at holds this pass (the output says how),
// else ends it.
func (r *run) holdsAt() bool {
	s := r.in.Steps[r.st.Index]
	part := PartitionAt(r.in.Steps, r.st.Index)
	switch {
	case r.st.Index <= r.in.Promotion.Through:
		if len(s.Analysis) > 0 {
			j := judge(r.st.Index, s.Analysis, r.in.tallies(r.st), r.st.Start, r.in.Now)
			j.Promoted = true
			r.out.Analyses = append(r.out.Analyses, j.Judged)
		}
		r.end("promoted")
		return false
	case len(s.Analysis) > 0:
		return r.analysisHolds(s, part)
	case s.Header != nil:
		if r.in.InEffect == nil || r.in.InEffect(nil, s.Header) {
			r.end(fmt.Sprintf("routed header %s to the new revision", s.Header.Name))
			return false
		}
		r.out.State, r.out.Partition = r.st, part
		r.out.Message = fmt.Sprintf("%s: routing header %s to the new revision", r.where(), s.Header.Name)
		return true
	case !s.Pause:
		return r.partitionHolds(s, part)
	}
	return r.pauseHolds(s, part)
}

// partitionHolds holds at a partition step (or a setWeight step) until the planner
// reports its split reached and ready, and a setWeight step's weight is in effect.
func (r *run) partitionHolds(s Step, part *planner.IntOrPercent) bool {
	reached := false
	switch r.in.Phase(part, false) {
	case planner.PhasePartitioned, planner.PhaseCompleted:
		reached = true
	}
	switch {
	case reached && s.Weight == nil:
		r.end("reached partition " + show(part))
		return false
	case reached && (r.in.InEffect == nil || r.in.InEffect(s.Weight, nil)):
		r.end(fmt.Sprintf("set weight %d%%", *s.Weight))
		return false
	}
	r.out.State, r.out.Partition = r.st, part
	r.out.Message = r.where() + ": moving to partition " + show(part)
	if s.Weight != nil {
		r.out.Message = fmt.Sprintf("%s: setting weight %d%% (partition %s)", r.where(), *s.Weight, show(part))
	}
	return true
}

// analysisHolds judges the analysis step the run is at: it ends once passed, and
// otherwise holds while it runs, until promoted when inconclusive, or asking for an
// abort when failed.
func (r *run) analysisHolds(s Step, part *planner.IntOrPercent) bool {
	j := judge(r.st.Index, s.Analysis, r.in.tallies(r.st), r.st.Start, r.in.Now)
	r.out.Analyses = append(r.out.Analyses, j.Judged)
	if j.Phase == analysis.Successful {
		r.end("analysis passed")
		return false
	}
	r.out.State, r.out.Partition, r.out.Paused = r.st, part, true
	switch j.Phase {
	case analysis.Failed:
		r.out.Abort = j.Message
		r.out.Message = r.where() + ": analysis failed: " + j.Message
	case analysis.Inconclusive:
		r.out.Message = r.where() + ": analysis inconclusive, promote or abort: " + j.Message
	default:
		r.out.Due, r.out.RequeueAt = j.due, j.next
		r.out.Message = r.where() + ": analysis running: " + j.Message
	}
	return true
}

// pauseHolds holds at the pause step the run is at: until its duration has passed
// since it started, or until promoted.
func (r *run) pauseHolds(s Step, part *planner.IntOrPercent) bool {
	if s.Duration != nil {
		until := r.st.Start.Add(*s.Duration)
		if !r.in.Now.Before(until) {
			r.end(fmt.Sprintf("paused for %s", *s.Duration))
			return false
		}
		r.out.State, r.out.Partition, r.out.Paused, r.out.RequeueAt = r.st, part, true, until
		r.out.Message = fmt.Sprintf("%s: paused for %s, until %s", r.where(), *s.Duration, until.UTC().Format(time.RFC3339))
		return true
	}
	r.out.State, r.out.Partition, r.out.Paused = r.st, part, true
	r.out.Message = r.where() + ": paused until promoted"
	return true
}

// tallies are the recorded measurements of the step st is at: only the step the run
// started at has any (the index only grows within a run).
func (in Input) tallies(st State) map[string]analysis.Tally {
	if st.Index == in.State.Index {
		return in.Tallies
	}
	return nil
}

// judged is a Judged with what a running step needs next.
type judged struct {
	Judged
	due  []analysis.Metric
	next time.Time // the soonest measurement not yet due (zero: none)
}

// judge assesses the metrics of analysis step i that started at start.
func judge(i int, metrics []analysis.Metric, tallies map[string]analysis.Tally, start, now time.Time) judged {
	j := judged{Judged: Judged{Step: i, Start: start}}
	var phases []analysis.Phase
	var running, done, bad []string
	for _, m := range metrics {
		t := tallies[m.Name]
		phase, msg := analysis.Assess(m, t)
		phases = append(phases, phase)
		j.Metrics = append(j.Metrics, JudgedMetric{Name: m.Name, Phase: phase, Message: msg})
		switch phase {
		case analysis.Running:
			running = append(running, fmt.Sprintf("%s %d/%d", m.Name, t.Count(), m.Count))
			if at := analysis.NextAt(m, t, start); !now.Before(at) {
				j.due = append(j.due, m)
			} else if j.next.IsZero() || at.Before(j.next) {
				j.next = at
			}
		case analysis.Successful:
			done = append(done, msg)
		default:
			bad = append(bad, msg)
		}
	}
	j.Phase = analysis.Combine(phases)
	switch j.Phase {
	case analysis.Running:
		j.Message = "measured " + strings.Join(running, ", ")
	case analysis.Successful:
		j.Message = strings.Join(done, "; ")
	default:
		j.Message = strings.Join(bad, "; ")
		j.due, j.next = nil, time.Time{} // a failed or inconclusive step measures no more
	}
	return j
}

// PartitionAt is the partition held at step i: that of the last partition step at or
// before i, or nil (no partition yet: a pause or an analysis before any partition step
// holds whatever split there is).
func PartitionAt(steps []Step, i int) *planner.IntOrPercent {
	for j := min(i, len(steps)-1); j >= 0; j-- {
		if !steps[j].holds() {
			return steps[j].Partition
		}
	}
	return nil
}

// Raises returns the index of the first partition step whose partition is larger than
// an earlier partition step's of the same kind (both counts or both percentages), or
// -1. A canary only ever moves forward.
func Raises(steps []Step) (int, *planner.IntOrPercent) {
	var lastCount, lastPercent *planner.IntOrPercent
	for i, s := range steps {
		if s.holds() || s.Partition == nil {
			continue
		}
		last := &lastCount
		if s.Partition.Percent {
			last = &lastPercent
		}
		if *last != nil && s.Partition.Value > (*last).Value {
			return i, *last
		}
		*last = s.Partition
	}
	return -1, nil
}

func show(p *planner.IntOrPercent) string {
	switch {
	case p == nil:
		return "0"
	case p.Percent:
		return fmt.Sprintf("%d%%", p.Value)
	}
	return fmt.Sprintf("%d", p.Value)
}
