// Package steps is the step machine of a stepped rollout (spec.rollout.steps): a pure
// function of the steps, where the rollout is in them, the clock, what the user
// promoted, and the planner's view of a hold. It decides which partition and pause the
// planner holds this pass; the planner still decides every replica count, so each step
// keeps the invariants of any rollout.
package steps

import (
	"fmt"
	"time"

	"github.com/dgd-rollout/operator/controllers/planner"
)

// Step is one step: a partition to reach and hold, or a pause.
type Step struct {
	// Partition is the split a partition step moves to; nil for a pause.
	Partition *planner.IntOrPercent
	// Pause marks a pause step; Duration is its length, nil until promoted.
	Pause    bool
	Duration *time.Duration
}

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
}

// Done reports whether every step is over.
func (o Output) Done(steps []Step) bool { return o.State.Index >= len(steps) }

// Run advances through every step whose hold is already over and returns the hold of
// the first that is not. A partition step is over once the planner reports its split
// reached and ready (or the rollout complete); a pause once its duration has passed
// since it started, or when promoted. Several steps may end in one pass.
func Run(in Input) Output {
	st := in.State
	if st.Index < 0 {
		st.Index = 0
	}
	out := Output{}
	end := func(why string) {
		out.Ended = append(out.Ended, fmt.Sprintf("step %d of %d %s", st.Index+1, len(in.Steps), why))
		st.Index++
		st.Start = in.Now
	}
	switch {
	case st.Index >= len(in.Steps):
	case in.Promotion.Full:
		out.Ended = append(out.Ended, fmt.Sprintf("steps %d to %d of %d skipped: promoted in full", st.Index+1, len(in.Steps), len(in.Steps)))
		st.Index, st.Start = len(in.Steps), in.Now
	case in.NothingToRoll:
		st.Index, st.Start = len(in.Steps), in.Now
	}
	for st.Index < len(in.Steps) {
		s := in.Steps[st.Index]
		part := PartitionAt(in.Steps, st.Index)
		if st.Index <= in.Promotion.Through {
			end("promoted")
			continue
		}
		if !s.Pause {
			switch in.Phase(part, false) {
			case planner.PhasePartitioned, planner.PhaseCompleted:
				end("reached partition " + show(part))
				continue
			}
			out.State, out.Partition = st, part
			out.Message = fmt.Sprintf("step %d of %d: moving to partition %s", st.Index+1, len(in.Steps), show(part))
			return out
		}
		if s.Duration != nil {
			until := st.Start.Add(*s.Duration)
			if !in.Now.Before(until) {
				end(fmt.Sprintf("paused for %s", *s.Duration))
				continue
			}
			out.State, out.Partition, out.Paused, out.RequeueAt = st, part, true, until
			out.Message = fmt.Sprintf("step %d of %d: paused for %s, until %s", st.Index+1, len(in.Steps), *s.Duration, until.UTC().Format(time.RFC3339))
			return out
		}
		out.State, out.Partition, out.Paused = st, part, true
		out.Message = fmt.Sprintf("step %d of %d: paused until promoted", st.Index+1, len(in.Steps))
		return out
	}
	out.State = st
	return out
}

// PartitionAt is the partition held at step i: that of the last partition step at or
// before i, or nil (no partition yet: a pause before any partition step holds whatever
// split there is).
func PartitionAt(steps []Step, i int) *planner.IntOrPercent {
	for j := min(i, len(steps)-1); j >= 0; j-- {
		if !steps[j].Pause {
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
		if s.Pause || s.Partition == nil {
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
