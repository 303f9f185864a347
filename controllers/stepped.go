package controllers

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/planner"
	"github.com/dgd-rollout/operator/controllers/steps"
)

// runSteps decides, for a DGD with spec.rollout.steps, the hold of this pass (p.hold):
// the step machine (package steps) runs on the observed workloads with the planner's
// phase for each candidate hold, the step state the status recorded for the same worker
// rollout, the clock and the user's promotion (AnnotationPromote). Without steps it
// leaves p.hold nil and the spec's partition and paused apply as they are.
func (p *pass) runSteps() error {
	ro := p.dgd.RolloutOrDefault()
	if len(ro.Steps) == 0 {
		return nil
	}
	list := make([]steps.Step, len(ro.Steps))
	for i, s := range ro.Steps {
		switch {
		case s.Partition != nil && !validPartition(*s.Partition):
			return &invalidSpecError{msg: fmt.Sprintf("spec.rollout.steps[%d].partition: %q must be a non-negative integer or a percentage from 0%% to 100%%", i, s.Partition.String())}
		case s.Partition != nil:
			list[i] = steps.Step{Partition: toIntOrPercent(s.Partition)}
		case s.Pause != nil:
			list[i] = steps.Step{Pause: true}
			if s.Pause.Duration != nil {
				d := s.Pause.Duration.Duration
				list[i].Duration = &d
			}
		}
	}
	if i, prev := steps.Raises(list); i >= 0 {
		return &invalidSpecError{msg: fmt.Sprintf("spec.rollout.steps[%d].partition: %s raises the partition of an earlier step (%s): a canary only moves forward",
			i, ro.Steps[i].Partition.String(), showPartition(prev))}
	}
	state := steps.State{Start: p.now}
	if ru := p.old.RollingUpdate; ru != nil && ru.CurrentStepIndex != nil && p.old.UpdateWorkerHash == p.updateHash() {
		state.Index = int(*ru.CurrentStepIndex)
		if ru.CurrentStepStartTime != nil {
			state.Start = ru.CurrentStepStartTime.Time
		}
	}
	workers := p.workers()
	out := steps.Run(steps.Input{
		Steps: list, State: state, Now: p.now,
		Promotion:     p.promotion(),
		NothingToRoll: !p.hasOldWorkers(),
		Phase: func(partition *planner.IntOrPercent, paused bool) planner.Phase {
			in := p.inputFrom(workers)
			in.Spec.Partition, in.Spec.Paused = partition, paused || ro.Paused
			return planner.Compute(in).Phase
		},
	})
	out.State.Start = out.State.Start.Truncate(time.Second) // as status.rollingUpdate stores it
	p.hold = &out
	for _, e := range out.Ended {
		p.event("Normal", v1alpha1.EventRolloutStepEnded, fmt.Sprintf("revision %d: %s", p.revs.Update.Revision, e))
	}
	if !out.RequeueAt.IsZero() {
		p.requeueIn(out.RequeueAt.Sub(p.now) + 100*time.Millisecond)
	}
	return nil
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
