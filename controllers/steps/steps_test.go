package steps

import (
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/controllers/planner"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func pct(v int32) *planner.IntOrPercent { return &planner.IntOrPercent{Value: v, Percent: true} }
func part(v int32) Step                 { return Step{Partition: pct(v)} }
func pause(d time.Duration) Step        { return Step{Pause: true, Duration: &d} }
func hold() Step                        { return Step{Pause: true} }

// check is an analysis step of metrics named after their count: each is measured
// count times, 10 s apart, and tolerates no failure and no inconclusive measurement.
func check(counts ...int32) Step {
	var ms []analysis.Metric
	for i, c := range counts {
		ms = append(ms, analysis.Metric{Name: string(rune('a' + i)), SuccessCondition: "result < 1", Interval: 10 * time.Second,
			Count: c, ConsecutiveErrorLimit: analysis.DefaultConsecutiveErrorLimit})
	}
	return Step{Analysis: ms}
}

// measured adds one measurement of phase to each due metric, as the controller does
// between two runs of one pass.
func measured(tallies map[string]analysis.Tally, due []analysis.Metric, phase analysis.Phase, at time.Time) map[string]analysis.Tally {
	out := map[string]analysis.Tally{}
	for k, v := range tallies {
		out[k] = v
	}
	for _, m := range due {
		out[m.Name] = out[m.Name].Add(analysis.Measurement{Phase: phase, Value: "0.5", At: at})
	}
	return out
}

// world is a rollout that moves 25 points of old share per pass toward the partition
// it is asked to hold: the planner's phase for a hold is a function of the share left.
type world struct{ old int32 }

func (w *world) phase(p *planner.IntOrPercent, paused bool) planner.Phase {
	want := int32(0)
	if p != nil {
		want = p.Value
	}
	switch {
	case w.old == 0 && want == 0:
		return planner.PhaseCompleted
	case paused:
		return planner.PhasePaused
	case w.old == want:
		return planner.PhasePartitioned
	}
	return planner.PhaseInProgress
}

// move plays one pass of the planner under the hold.
func (w *world) move(o Output) {
	if o.Paused {
		return
	}
	want := int32(0)
	if o.Partition != nil {
		want = o.Partition.Value
	}
	switch {
	case w.old > want:
		w.old = max(want, w.old-25)
	case w.old < want:
		w.old = min(want, w.old+25) // never asked for: the property test fails on it
	}
}

func TestRunPartitionsAndTimedPause(t *testing.T) {
	steps := []Step{part(75), pause(time.Minute), part(50), part(0)}
	w := &world{old: 100}
	in := Input{Steps: steps, State: State{Start: t0}, Now: t0, Promotion: Promotion{Through: -1}, Phase: w.phase}
	o := Run(in)
	if o.State.Index != 0 || o.Partition.Value != 75 || o.Paused {
		t.Fatalf("first pass: %+v, want step 0 holding 75%%", o)
	}
	w.move(o) // 75% reached
	in.State, in.Now = o.State, t0.Add(time.Second)
	o = Run(in)
	if o.State.Index != 1 || !o.Paused || o.Partition.Value != 75 || !o.RequeueAt.Equal(t0.Add(time.Second+time.Minute)) {
		t.Fatalf("after reaching 75%%: %+v, want the pause of step 1 until %s", o, t0.Add(time.Second+time.Minute))
	}
	if len(o.Ended) != 1 || o.Ended[0] != "step 1/4 reached partition 75%" {
		t.Errorf("ended %q", o.Ended)
	}
	in.State, in.Now = o.State, o.RequeueAt.Add(-time.Millisecond)
	if o2 := Run(in); o2.State.Index != 1 || !o2.Paused {
		t.Fatalf("a millisecond early: %+v, want still paused", o2)
	}
	in.Now = o.RequeueAt
	o = Run(in)
	if o.State.Index != 2 || o.Paused || o.Partition.Value != 50 || !o.State.Start.Equal(in.Now) {
		t.Fatalf("at the deadline: %+v, want step 2 moving to 50%% from now", o)
	}
	for i := 0; i < 10 && !o.Done(steps); i++ {
		w.move(o)
		in.State = o.State
		o = Run(in)
	}
	if !o.Done(steps) || o.Partition != nil || o.Paused || w.old != 0 {
		t.Fatalf("not done: %+v, old share %d", o, w.old)
	}
}

func TestRunPauseUntilPromoted(t *testing.T) {
	steps := []Step{part(50), hold(), part(0)}
	w := &world{old: 50}
	in := Input{Steps: steps, Now: t0, Promotion: Promotion{Through: -1}, Phase: w.phase}
	o := Run(in)
	if o.State.Index != 1 || !o.Paused || !o.RequeueAt.IsZero() || o.Message != "step 2/3: paused until promoted" {
		t.Fatalf("%+v, want step 2 paused until promoted", o)
	}
	in.State, in.Now = o.State, t0.Add(24*time.Hour)
	if o = Run(in); o.State.Index != 1 {
		t.Fatalf("a day later: %+v, still paused", o)
	}
	in.Promotion = Promotion{Through: 0} // a promotion of an earlier step does not end this one
	if o = Run(in); o.State.Index != 1 {
		t.Fatalf("promoted through step 0: %+v, still paused", o)
	}
	in.Promotion = Promotion{Through: 1}
	if o = Run(in); o.State.Index != 2 || o.Paused || o.Partition.Value != 0 {
		t.Fatalf("promoted: %+v, want step 3 moving to 0%%", o)
	}
}

func TestRunSkips(t *testing.T) {
	steps := []Step{part(50), hold()}
	w := &world{old: 100}
	for name, in := range map[string]Input{
		"promoted in full": {Steps: steps, Promotion: Promotion{Through: -1, Full: true}, Phase: w.phase},
		"nothing to roll":  {Steps: steps, Promotion: Promotion{Through: -1}, NothingToRoll: true, Phase: w.phase},
		"already done":     {Steps: steps, State: State{Index: 2}, Promotion: Promotion{Through: -1}, Phase: w.phase},
	} {
		if o := Run(in); !o.Done(steps) || o.Partition != nil || o.Paused || o.Message != "" {
			t.Errorf("%s: %+v, want done with no hold", name, o)
		}
	}
}

func TestRunAnalysisPasses(t *testing.T) {
	steps := []Step{part(50), check(2), part(0)}
	w := &world{old: 50}
	in := Input{Steps: steps, Now: t0, Promotion: Promotion{Through: -1}, Phase: w.phase}
	o := Run(in)
	if o.State.Index != 1 || !o.Paused || o.Partition.Value != 50 || len(o.Due) != 1 || o.Abort != "" {
		t.Fatalf("%+v, want step 2 holding 50%% with metric a due", o)
	}
	// The controller measures and runs the machine again in the same pass.
	in.State, in.Tallies = o.State, measured(nil, o.Due, analysis.Successful, t0)
	o = Run(in)
	if o.State.Index != 1 || len(o.Due) != 0 || !o.RequeueAt.Equal(t0.Add(10*time.Second)) || !strings.HasPrefix(o.Message, "step 2/3: analysis running: measured a 1/2") {
		t.Fatalf("%+v, want the analysis running, the next measurement in 10 s", o)
	}
	in.Now = t0.Add(9 * time.Second)
	if o = Run(in); len(o.Due) != 0 {
		t.Fatalf("due a second early: %+v", o)
	}
	in.Now = t0.Add(10 * time.Second)
	o = Run(in)
	if len(o.Due) != 1 {
		t.Fatalf("%+v, want metric a due", o)
	}
	in.Tallies = measured(in.Tallies, o.Due, analysis.Successful, in.Now)
	o = Run(in)
	if o.State.Index != 2 || o.Paused || o.Partition.Value != 0 || len(o.Ended) != 1 || o.Ended[0] != "step 2/3 analysis passed" {
		t.Fatalf("%+v, want step 3 moving to 0%% after the analysis passed", o)
	}
	if j := o.Analyses[0]; j.Step != 1 || j.Phase != analysis.Successful || !strings.Contains(j.Message, `metric "a" passed: 2 of 2`) {
		t.Errorf("judged %+v", j)
	}
}

func TestRunAnalysisFailsOrIsInconclusive(t *testing.T) {
	steps := []Step{part(50), check(3, 3)}
	w := &world{old: 50}
	in := Input{Steps: steps, State: State{Index: 1, Start: t0}, Now: t0, Promotion: Promotion{Through: -1}, Phase: w.phase}
	o := Run(in)
	if len(o.Due) != 2 {
		t.Fatalf("%+v, want both metrics due", o)
	}
	fail := measured(nil, o.Due[:1], analysis.Failed, t0)
	in.Tallies = measured(fail, o.Due[1:], analysis.Successful, t0)
	o = Run(in)
	if o.State.Index != 1 || !o.Paused || !strings.Contains(o.Abort, `metric "a" failed`) || len(o.Due) != 0 || !o.RequeueAt.IsZero() {
		t.Fatalf("%+v, want an abort naming metric a, nothing due", o)
	}
	in.Tallies = measured(nil, []analysis.Metric{steps[1].Analysis[1]}, analysis.Inconclusive, t0)
	in.Now = t0.Add(time.Hour)
	o = Run(in)
	if o.Abort != "" || !o.Paused || len(o.Due) != 0 || !o.RequeueAt.IsZero() || !strings.Contains(o.Message, "analysis inconclusive, promote or abort") {
		t.Fatalf("%+v, want an inconclusive hold with nothing due", o)
	}
	in.Promotion = Promotion{Through: 1}
	o = Run(in)
	if !o.Done(steps) || len(o.Analyses) != 1 || !o.Analyses[0].Promoted || o.Analyses[0].Phase != analysis.Inconclusive {
		t.Fatalf("%+v, want the inconclusive step promoted", o)
	}
}

func TestPartitionAtAndRaises(t *testing.T) {
	steps := []Step{hold(), part(75), pause(time.Second), part(25)}
	for i, want := range []int32{-1, 75, 75, 25} {
		got := PartitionAt(steps, i)
		if (got == nil) != (want < 0) || got != nil && got.Value != want {
			t.Errorf("PartitionAt(%d) = %v, want %d", i, got, want)
		}
	}
	if i, _ := Raises(steps); i != -1 {
		t.Errorf("Raises = %d, want -1", i)
	}
	if i, prev := Raises([]Step{part(50), hold(), part(60)}); i != 2 || prev.Value != 50 {
		t.Errorf("Raises = %d (%v), want 2 (after 50%%)", i, prev)
	}
	counts := []Step{{Partition: &planner.IntOrPercent{Value: 2}}, part(80)}
	if i, _ := Raises(counts); i != -1 {
		t.Errorf("Raises mixes counts and percentages: %d", i)
	}
}

// refMetric is the test's own account of one metric of an analysis step: every
// measurement it was given, judged by the rules the analysis package documents (as
// Argo Rollouts' AnalysisRuns), written again here so that the step machine's
// properties are not judged by the functions it calls (analysis.Assess, NextAt):
//   - Failed once more measurements failed than failureLimit; else Inconclusive once
//     more were inconclusive than inconclusiveLimit, or more queries in a row erred
//     than consecutiveErrorLimit; else Successful once count measurements that did not
//     err were taken; else Running;
//   - the first measurement is due initialDelay after the step started, the next one
//     interval after the last that did not err, min(interval, 10 s) after an error.
type refMetric struct {
	m   analysis.Metric
	got []analysis.Measurement
}

func (r *refMetric) phase() analysis.Phase {
	var failed, inconclusive, counted, errorsInARow int32
	for _, x := range r.got {
		if x.Phase == analysis.Error {
			errorsInARow++
			continue
		}
		errorsInARow = 0
		counted++
		switch x.Phase {
		case analysis.Failed:
			failed++
		case analysis.Inconclusive:
			inconclusive++
		}
	}
	switch {
	case failed > r.m.FailureLimit:
		return analysis.Failed
	case inconclusive > r.m.InconclusiveLimit, errorsInARow > r.m.ConsecutiveErrorLimit:
		return analysis.Inconclusive
	case counted >= r.m.Count:
		return analysis.Successful
	}
	return analysis.Running
}

func (r *refMetric) due(start time.Time) time.Time {
	if len(r.got) == 0 {
		return start.Add(r.m.InitialDelay)
	}
	last := r.got[len(r.got)-1]
	if last.Phase == analysis.Error {
		return last.At.Add(min(r.m.Interval, 10*time.Second))
	}
	return last.At.Add(r.m.Interval)
}

// refStep is the phase of an analysis step from its metrics': a failed metric fails
// it, else an inconclusive one makes it inconclusive, else it runs until all passed.
func refStep(metrics map[string]*refMetric, step Step) analysis.Phase {
	out := analysis.Successful
	for _, m := range step.Analysis {
		switch metrics[m.Name].phase() {
		case analysis.Failed:
			return analysis.Failed
		case analysis.Inconclusive:
			out = analysis.Inconclusive
		case analysis.Running:
			if out == analysis.Successful {
				out = analysis.Running
			}
		}
	}
	return out
}

// TestRunProperties runs random non-raising step lists (partitions, pauses, analyses)
// through a simulated rollout with a random clock, random promotions and random
// measurements: the index never goes back, the held partition never rises, a pause or
// an analysis holds (no move), a timed pause ends no earlier than its deadline, a
// metric is measured no earlier than it is due and every metric due is measured while
// its step runs, an analysis step ends only when every metric passed (or promoted), an
// abort only when a metric failed, and every rollout completes or is aborted. Metrics
// are judged by the test's reference (refMetric), not by the analysis package.
func TestRunProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var aborts, passed int
	defer func() {
		t.Logf("3000 rollouts: %d aborted, %d analysis steps passed", aborts, passed)
		if aborts == 0 || passed == 0 {
			t.Error("the random rollouts never aborted or never passed an analysis")
		}
	}()
	for n := 0; n < 3000; n++ {
		var steps []Step
		level := int32(100)
		for k := rng.Intn(6); k > 0; k-- {
			switch rng.Intn(8) {
			case 0, 1, 2:
				level = int32(rng.Intn(int(level/25)+1)) * 25
				steps = append(steps, part(level))
			case 3:
				steps = append(steps, hold())
			case 4, 5:
				steps = append(steps, pause(time.Duration(rng.Intn(120))*time.Second))
			default:
				counts := make([]int32, 1+rng.Intn(2))
				for i := range counts {
					counts[i] = int32(1 + rng.Intn(3))
				}
				steps = append(steps, check(counts...))
			}
		}
		w := &world{old: 100}
		now := t0
		in := Input{Steps: steps, State: State{Start: now}, Now: now, Promotion: Promotion{Through: -1}, Phase: w.phase}
		tallies := map[int]map[string]analysis.Tally{} // by step, as the status records them (the machine's input)
		refs := map[int]map[string]*refMetric{}        // by step, the reference's account
		ref := func(step int) map[string]*refMetric {
			if refs[step] == nil {
				refs[step] = map[string]*refMetric{}
				for _, m := range steps[step].Analysis {
					refs[step][m.Name] = &refMetric{m: m}
				}
			}
			return refs[step]
		}
		lastPart := int32(101)
		aborted := false
		for pass := 0; !aborted; pass++ {
			if pass > 400 {
				t.Fatalf("case %d: steps %+v did not complete (state %+v, old %d)", n, steps, in.State, w.old)
			}
			in.Tallies = tallies[in.State.Index]
			o := Run(in)
			for {
				if i := o.State.Index; i < len(steps) && len(steps[i].Analysis) > 0 && refStep(ref(i), steps[i]) == analysis.Running {
					listed := map[string]bool{}
					for _, m := range o.Due {
						listed[m.Name] = true
					}
					for _, m := range steps[i].Analysis { // every metric due is measured
						if r := ref(i)[m.Name]; r.phase() == analysis.Running && !now.Before(r.due(o.State.Start)) && !listed[m.Name] {
							t.Fatalf("case %d: metric %s of step %d due since %s, not measured at %s", n, m.Name, i, r.due(o.State.Start), now)
						}
					}
				}
				if len(o.Due) == 0 {
					break
				}
				// Measure, as the controller does, and run again.
				for _, m := range o.Due {
					if at := ref(o.State.Index)[m.Name].due(o.State.Start); now.Before(at) {
						t.Fatalf("case %d: metric %s due at %s before its time %s", n, m.Name, now, at)
					}
				}
				phase := []analysis.Phase{analysis.Successful, analysis.Successful, analysis.Successful, analysis.Error, analysis.Error, analysis.Failed, analysis.Inconclusive}[rng.Intn(7)]
				if rng.Intn(4) > 0 {
					phase = analysis.Successful
				}
				tallies[o.State.Index] = measured(tallies[o.State.Index], o.Due, phase, now)
				for _, m := range o.Due {
					r := ref(o.State.Index)[m.Name]
					r.got = append(r.got, analysis.Measurement{Phase: phase, At: now})
				}
				in.State, in.Tallies = o.State, tallies[o.State.Index]
				o = Run(in)
			}
			for i := in.State.Index; i < o.State.Index; i++ { // an analysis step ends passed or promoted
				if a := steps[i].Analysis; len(a) > 0 && i > in.Promotion.Through && !in.Promotion.Full && !in.NothingToRoll {
					for _, m := range a {
						if p := ref(i)[m.Name].phase(); p != analysis.Successful {
							t.Fatalf("case %d: analysis step %d ended with metric %s %s", n, i, m.Name, p)
						}
					}
				}
			}
			if o.Abort != "" {
				failed := false
				for _, m := range steps[o.State.Index].Analysis {
					failed = failed || ref(o.State.Index)[m.Name].phase() == analysis.Failed
				}
				if !failed || !o.Paused {
					t.Fatalf("case %d: abort %q without a failed metric, or not holding", n, o.Abort)
				}
				aborted = true
				aborts++
			}
			for _, e := range o.Ended {
				if strings.HasSuffix(e, "analysis passed") {
					passed++
				}
			}
			if o.State.Index < in.State.Index {
				t.Fatalf("case %d: index went back %d → %d", n, in.State.Index, o.State.Index)
			}
			if o.Partition != nil { // nil: a pause before any partition, or done
				if o.Partition.Value > lastPart {
					t.Fatalf("case %d: held partition rose %d → %d", n, lastPart, o.Partition.Value)
				}
				lastPart = o.Partition.Value
			}
			if !o.RequeueAt.IsZero() && o.RequeueAt.Before(now) {
				t.Fatalf("case %d: requeue in the past", n)
			}
			if i := o.State.Index; i < len(steps) && steps[i].Pause && steps[i].Duration != nil && now.Before(o.State.Start.Add(*steps[i].Duration)) != o.Paused {
				t.Fatalf("case %d: timed pause of step %d: paused %v at %s (started %s)", n, i, o.Paused, now, o.State.Start)
			}
			before := w.old
			w.move(o)
			if o.Paused && w.old != before {
				t.Fatalf("case %d: moved while paused", n)
			}
			if o.Done(steps) && w.old == 0 || aborted {
				break
			}
			in.State = o.State
			switch rng.Intn(4) {
			case 0:
				now = now.Add(time.Duration(rng.Intn(90)) * time.Second)
			case 1:
				if o.Paused && o.RequeueAt.IsZero() {
					in.Promotion.Through = o.State.Index // kubectl dgd rollout promote
				}
			}
			in.Now = now
		}
	}
}
