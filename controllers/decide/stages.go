package decide

import (
	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/planner"
	"github.com/dgd-rollout/operator/controllers/steps"
)

// The values one stage of Decide hands the next, in the order Decide makes them: the
// attempt (abort.go), the steps' hold (stepped.go), the course (input.go), the worker
// moves (rollout.go) and what the pass leaves (progress.go).

// attempt is the try of this rollout and its abort.
type attempt struct {
	number int32
	// abort says why the rollout was aborted (nil: it was not).
	abort *v1alpha1.AbortStatus
	// retried: this pass started the attempt (a retry of an abort).
	retried bool
}

// stepped is the outcome of spec.rollout.steps for this pass.
type stepped struct {
	// hold is the step machine's decision (nil without steps, or once aborted).
	hold *steps.Output
	// analyses are status.rollingUpdate.analyses as the pass leaves them.
	analyses []v1alpha1.AnalysisStatus
	// count is the number of steps.
	count int
}

// course is where the workers are headed this pass: the revision they move to (goal,
// in h), the DGD their services render from, whether the rollout is aborted, and the
// hold of spec.rollout.steps (nil without steps). The planner's input is built from it.
type course struct {
	h       *history
	goalDGD *v1alpha1.DynamoGraphDeployment
	aborted bool
	hold    *steps.Output
}

// moves are the worker writes of a pass: the plan the planner made for the observed
// workloads, and the workloads it creates.
type moves struct {
	plan    planner.Plan
	created []Workload
	// traffic is the split of the traffic between cohorts the pass asks for; hold,
	// when set, why the workers held (hold.why): the prelude of cohorts, or a cohort
	// draining.
	traffic trafficPlan
	hold    *held
}

// held is why a pass moved no worker: its reason and message.
type held struct{ reason, why string }

// leaves is what the pass leaves, as the status reports it: the workloads (res), the
// planner's view of them (after: the phase the status reports), the course and the
// steps.
type leaves struct {
	c       course
	a       attempt
	steps   stepped
	res     []Workload
	after   planner.Plan
	traffic trafficPlan
	hold    *held
}
