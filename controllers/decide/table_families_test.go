package decide_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/grove"
	"github.com/dgd-rollout/operator/backends/lws"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/revisions"
	"github.com/dgd-rollout/operator/test/harness"
)

// The families of the golden table. Most cases are states a rollout passes through,
// reached by playing the graph through Decide in the world of decide_test.go (every
// write made, pods ready at once), so that the status before each case is the one the
// operator wrote; each state is then varied in what the pass observes (readiness of
// the old and new workloads, the clock, annotations, measurements) and each variant is
// one case.
func init() {
	families = []family{
		{"rolling", rollingCases},
		{"recreate", recreateCases},
		{"partition", partitionCases},
		{"paused", pausedCases},
		{"steps", stepsCases},
		{"analysis", analysisCases},
		{"abort", abortCases},
		{"scale", scaleCases},
		{"invalid", invalidCases},
		{"stale", staleCases},
		{"conflicts", conflictCases},
		{"backends", backendCases},
		{"deadline", deadlineCases},
		{"history", historyCases},
		{"unschedulable", unschedulableCases},
		{"stable", stableCases},
		{"dynamo", dynamoCases},
		{"dynamo-disaggregatedset", dynamoDisaggregatedSetCases},
		{"restart", restartCases},
		{"cohorts", cohortCases},
	}
}

// The real descriptions of the LeaderWorkerSet and Grove backends (nothing in them
// reads the cluster: backends.Description).
var (
	lwsBackend   = lws.New(nil, nil, render.Config{}).Describe()
	groveBackend = grove.New(nil, nil, render.Config{}).Describe()
)

// variant changes what a pass observes of a state: the snapshot is a copy.
type variant struct {
	name string
	vary func(s *decide.Snapshot)
}

// updateHash is the worker hash of the spec of s (its update revision's, recorded or
// not yet).
func updateHash(s *decide.Snapshot) string {
	return revisions.Hash(revisions.NewWorkerTemplate(s.DGD), ptr.To(ptr.Deref(s.DGD.Status.CollisionCount, 0)))
}

// readiness varies the ready replicas of the worker workloads of the update revision
// (onNew) or of the others: ready is the count given the workload's replicas.
func readiness(name string, onNew bool, ready func(replicas int32) int32) variant {
	return variant{name, func(s *decide.Snapshot) {
		hash := updateHash(s)
		for i := range s.Workloads {
			w := &s.Workloads[i]
			if w.Hash == "" || (w.Hash == hash) != onNew || w.Terminating {
				continue
			}
			w.Ready = ready(w.Replicas)
			w.Current, w.Pods = max(w.Current, w.Replicas), max(w.Pods, w.Replicas)
		}
	}}
}

var (
	// allReady: every workload's replicas exist and are ready (the world's own state
	// when played with pods ready at once).
	allReady = variant{"all-ready", func(s *decide.Snapshot) {
		for i := range s.Workloads {
			if w := &s.Workloads[i]; !w.Terminating {
				w.Ready, w.Updated = w.Replicas, w.Replicas
				w.Current, w.Pods = max(w.Current, w.Replicas), max(w.Pods, w.Replicas)
			}
		}
	}}
	newNone     = readiness("new-none-ready", true, func(int32) int32 { return 0 })
	newOneShort = readiness("new-one-unready", true, func(r int32) int32 { return max(r-1, 0) })
	oldOneShort = readiness("old-one-unready", false, func(r int32) int32 { return max(r-1, 0) })
	oldNone     = readiness("old-none-ready", false, func(int32) int32 { return 0 })
	// oldPodsLeft: the old revision's workloads scaled to zero still have their pods
	// terminating (a workload's status stops counting them at once, Pods does not).
	oldPodsLeft = variant{"old-pods-terminating", func(s *decide.Snapshot) {
		hash := updateHash(s)
		for i := range s.Workloads {
			if w := &s.Workloads[i]; w.Hash != "" && w.Hash != hash && w.Replicas == 0 {
				w.Pods = 2
			}
		}
	}}
	// later advances the clock past the default progress deadline (600 s).
	later = variant{"after-601s", func(s *decide.Snapshot) { s.Now = s.Now.Add(601 * time.Second) }}
)

// rolloutVariants are the readiness states every pass of a rollout is decided in.
var rolloutVariants = []variant{allReady, newNone, newOneShort, oldOneShort}

// cases emits, for a snapshot, one case per variant.
func cases(prefix string, s *decide.Snapshot, vs []variant) []tcase {
	var out []tcase
	for _, v := range vs {
		c := copySnapshot(s)
		v.vary(c)
		out = append(out, tcase{name: prefix + "/" + v.name, snap: c})
	}
	return out
}

func copySnapshot(s *decide.Snapshot) *decide.Snapshot {
	c := *s
	c.DGD = s.DGD.DeepCopy()
	c.Workloads = slices.Clone(s.Workloads)
	c.Measurements = maps.Clone(s.Measurements)
	c.Names = maps.Clone(s.Names)
	return &c
}

// walk makes change to a world and plays the passes that follow until one writes
// nothing, emitting each pass's snapshot (with the names and measurements it needs
// answered) in every variant, the settled state's too.
func walk(t *testing.T, w *world, prefix string, change func(*v1alpha1.DynamoGraphDeployment), vs []variant) []tcase {
	t.Helper()
	if change != nil {
		w.edit(change)
	}
	var out []tcase
	var said []string
	for i := range 12 {
		s, d := w.decideFor(t)
		out = append(out, cases(fmt.Sprintf("%s/pass-%d", prefix, i), s, vs)...)
		if said = w.apply(t, d, true); quiet(said) {
			return out
		}
	}
	t.Fatalf("%s: no settled state after 12 passes; the last said %q", prefix, said)
	return nil
}

// quiet reports whether a pass wrote nothing but the stable services' Ensure and said
// nothing.
func quiet(said []string) bool {
	for _, l := range said {
		if !isStableEnsure(l) {
			return false
		}
	}
	return true
}

// settledWorld is a world whose graph is deployed and settled.
func settledWorld(t *testing.T, dgd *v1alpha1.DynamoGraphDeployment) *world {
	t.Helper()
	w := newWorld(dgd)
	w.settle(t)
	return w
}

func disagg(p, d int32) *harness.DGD {
	return harness.NewDGD("ns", "g").Disagg(p, d, "img:1")
}

func aggregated(r int32) *harness.DGD {
	return harness.NewDGD("ns", "g").Worker("worker", harness.VLLM, "", r, 1, "img:1")
}

func setPartition(p string) func(*v1alpha1.DynamoGraphDeployment) {
	return func(d *v1alpha1.DynamoGraphDeployment) {
		if p == "" {
			d.Spec.Rollout.Partition = nil
			return
		}
		v := intstr.Parse(p)
		d.Spec.Rollout.Partition = &v
	}
}

func setPaused(p bool) func(*v1alpha1.DynamoGraphDeployment) {
	return func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Paused = p }
}

func setReplicas(service string, n int32) func(*v1alpha1.DynamoGraphDeployment) {
	return func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Services[service].Replicas = ptr.To(n) }
}

func rollingCases(t *testing.T) []tcase {
	var out []tcase
	shapes := []struct {
		name string
		dgd  func() *harness.DGD
	}{{"disagg-2-2", func() *harness.DGD { return disagg(2, 2) }}, {"disagg-4-2", func() *harness.DGD { return disagg(4, 2) }}, {"agg-3", func() *harness.DGD { return aggregated(3) }}}
	for _, sh := range shapes {
		for _, b := range [][2]string{{"1", "0"}, {"0", "1"}, {"2", "1"}, {"25%", "25%"}, {"100%", "0"}} {
			w := settledWorld(t, sh.dgd().Rollout(b[0], b[1]).Obj())
			out = append(out, walk(t, w, fmt.Sprintf("%s/surge-%s-unavailable-%s", sh.name, b[0], b[1]), newImage, rolloutVariants)...)
		}
	}
	return out
}

func recreateCases(t *testing.T) []tcase {
	var out []tcase
	for name, dgd := range map[string]func() *harness.DGD{"disagg-2-2": func() *harness.DGD { return disagg(2, 2) }, "agg-3": func() *harness.DGD { return aggregated(3) }} {
		w := settledWorld(t, dgd().Strategy(v1alpha1.RecreateStrategy).Obj())
		out = append(out, walk(t, w, name, newImage, []variant{allReady, newNone, oldOneShort, oldPodsLeft})...)
	}
	// A Recreate whose status already says Ready False announces nothing.
	w := settledWorld(t, disagg(2, 2).Strategy(v1alpha1.RecreateStrategy).Obj())
	w.dgd.Status.Conditions = nil
	out = append(out, walk(t, w, "disagg-2-2-no-ready-condition", newImage, []variant{allReady})...)
	return sortCases(out)
}

// sortCases orders cases by name (cases built from a map come in random order).
func sortCases(cs []tcase) []tcase {
	slices.SortStableFunc(cs, func(a, b tcase) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return cs
}

func partitionCases(t *testing.T) []tcase {
	var out []tcase
	for _, p := range []string{"1", "2", "3", "25%", "50%", "75%", "100%"} {
		w := settledWorld(t, disagg(4, 4).Rollout("1", "0").Obj())
		prefix := "disagg-4-4/partition-" + p
		out = append(out, walk(t, w, prefix, both(newImage, setPartition(p)), []variant{allReady, newNone, oldOneShort})...)
		out = append(out, walk(t, w, prefix+"/then-0", setPartition("0"), []variant{allReady, newNone})...)
	}
	// A partition on a 4/2 graph: the integer is a fraction of the largest service.
	w := settledWorld(t, disagg(4, 2).Rollout("1", "0").Obj())
	out = append(out, walk(t, w, "disagg-4-2/partition-2", both(newImage, setPartition("2")), []variant{allReady, newNone})...)
	// Raising the partition of a rollout half done moves workers back.
	w = settledWorld(t, disagg(4, 4).Rollout("1", "0").Obj())
	out = append(out, walk(t, w, "disagg-4-4/raise/partition-25%", both(newImage, setPartition("25%")), []variant{allReady})...)
	out = append(out, walk(t, w, "disagg-4-4/raise/partition-25%/raised-to-75%", setPartition("75%"), []variant{allReady, newNone})...)
	return out
}

func pausedCases(t *testing.T) []tcase {
	var out []tcase
	for _, at := range []int{0, 1, 2} {
		w := settledWorld(t, disagg(4, 4).Rollout("1", "0").Obj())
		w.edit(newImage)
		for range at {
			w.step(t, true)
		}
		prefix := fmt.Sprintf("disagg-4-4/paused-after-%d-passes", at)
		out = append(out, walk(t, w, prefix, setPaused(true), []variant{allReady, newNone, oldOneShort, later})...)
		out = append(out, walk(t, w, prefix+"/resumed", setPaused(false), []variant{allReady, newNone})...)
	}
	// Paused before the change: the new revision is recorded, nothing moves.
	w := settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
	out = append(out, walk(t, w, "disagg-2-2/paused-then-new-image", both(setPaused(true), newImage), []variant{allReady, later})...)
	return out
}

func setSteps(list ...v1alpha1.RolloutStep) func(*v1alpha1.DynamoGraphDeployment) {
	return func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Steps = list }
}

func partitionStep(p string) v1alpha1.RolloutStep {
	v := intstr.Parse(p)
	return v1alpha1.RolloutStep{Partition: &v}
}

func pauseStep(d time.Duration) v1alpha1.RolloutStep {
	if d == 0 {
		return v1alpha1.RolloutStep{Pause: &v1alpha1.RolloutPause{}}
	}
	return v1alpha1.RolloutStep{Pause: &v1alpha1.RolloutPause{Duration: &metav1.Duration{Duration: d}}}
}

func stepsCases(t *testing.T) []tcase {
	var out []tcase
	promote := func(v string) variant {
		return variant{"promote-" + v, func(s *decide.Snapshot) { setAnnotation(s.DGD, v1alpha1.AnnotationPromote, v) }}
	}
	at := func(d time.Duration) variant {
		return variant{"at+" + d.String(), func(s *decide.Snapshot) { s.Now = s.Now.Add(d) }}
	}
	vs := []variant{allReady, newNone, promote("2/1"), promote("2/2"), promote("2/full"), promote("1/full"), at(59 * time.Second), at(61 * time.Second)}
	lists := map[string][]v1alpha1.RolloutStep{
		"partition-50%-pause":                     {partitionStep("50%"), pauseStep(0)},
		"partition-75%-pause-60s-partition-25%":   {partitionStep("75%"), pauseStep(time.Minute), partitionStep("25%")},
		"pause-first":                             {pauseStep(0), partitionStep("50%")},
		"partition-1-partition-2-partition-3":     {partitionStep("3"), partitionStep("2"), partitionStep("1")},
		"partition-50%-pause-60s-then-completion": {partitionStep("50%"), pauseStep(time.Minute)},
	}
	for _, name := range sortedStrings(lists) {
		w := settledWorld(t, disagg(4, 4).Rollout("1", "0").Obj())
		out = append(out, walk(t, w, name, both(newImage, setSteps(lists[name]...)), vs)...)
		// Promoted through the pause: the rollout goes on to completion.
		out = append(out, walk(t, w, name+"/promoted-full", annotate(v1alpha1.AnnotationPromote, "2/full"), []variant{allReady})...)
	}
	// Steps on a first deploy: nothing to roll, the steps are passed.
	w := newWorld(disagg(2, 2).Rollout("1", "0").Obj())
	setSteps(partitionStep("50%"), pauseStep(0))(w.dgd)
	out = append(out, walk(t, w, "first-deploy-with-steps", nil, []variant{allReady})...)
	// An undo during a canary: the spec goes back to the stable workers, which return
	// without the steps (RolloutStepsSkipped).
	w = settledWorld(t, disagg(4, 4).Rollout("1", "0").Obj())
	steps := setSteps(partitionStep("50%"), pauseStep(0))
	out = append(out, walk(t, w, "undo-during-canary", both(newImage, steps), []variant{allReady})...)
	out = append(out, walk(t, w, "undo-during-canary/undone", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "img:1") }, []variant{allReady, newNone})...)
	return out
}

func setAnnotation(d *v1alpha1.DynamoGraphDeployment, k, v string) {
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[k] = v
}

// errorRate is an analysis metric over the canary's Dynamo namespace.
func errorRate(success, failure string) v1alpha1.AnalysisMetric {
	return v1alpha1.AnalysisMetric{Name: "error-rate", SuccessCondition: success, FailureCondition: failure,
		Query: `sum(rate(dynamo_frontend_requests_total{status="error",dynamo_namespace="{{.Canary.Namespace}}"}[1m]))`}
}

// tableTemplates are the analysis templates every world has: AnalysisTemplate
// "error-rate" (its query's endpoint an argument without a default, its threshold one
// with) and ClusterAnalysisTemplate "error-rate" (the same).
func tableTemplates() decide.Templates {
	t := &v1alpha1.AnalysisTemplateSpec{
		Args: []v1alpha1.AnalysisArgument{{Name: "endpoint"}, {Name: "max", Value: ptr.To("0.05")}},
		Metrics: []v1alpha1.AnalysisMetric{{Name: "error-rate", SuccessCondition: "result < {{args.max}}",
			Query: `sum(rate(dynamo_component_errors_total{dynamo_namespace="{{.Canary.MetricsNamespace}}",dynamo_endpoint="{{args.endpoint}}"}[1m]))`}},
	}
	return decide.Templates{{TemplateName: "error-rate"}: t, {TemplateName: "error-rate", ClusterScope: true}: t}
}

// templateStep is an analysis step of the template named, with args as name, value.
func templateStep(name string, cluster bool, args ...string) v1alpha1.RolloutStep {
	a := &v1alpha1.RolloutAnalysis{Templates: []v1alpha1.AnalysisTemplateRef{{TemplateName: name, ClusterScope: cluster}}}
	for i := 0; i+1 < len(args); i += 2 {
		a.Args = append(a.Args, v1alpha1.AnalysisArgument{Name: args[i], Value: ptr.To(args[i+1])})
	}
	return v1alpha1.RolloutStep{Analysis: a}
}

func analysisStep(ms ...v1alpha1.AnalysisMetric) v1alpha1.RolloutStep {
	return v1alpha1.RolloutStep{Analysis: &v1alpha1.RolloutAnalysis{Metrics: ms}}
}

func measured(r analysis.Result) func(decide.Measure) analysis.Result {
	return func(decide.Measure) analysis.Result { return r }
}

// answerDue gives the snapshot r as the result of every measurement of step that is due
// in it (Decision.Measure: the runner's answer landed before the pass).
func answerDue(s *decide.Snapshot, step int, r analysis.Result) {
	s.Measurements = nil
	res := map[decide.Measure]analysis.Result{}
	for _, m := range decide.Decide(s).Measure {
		if m.Step == step {
			res[m.Measure] = r
		}
	}
	s.Measurements = res
}

func analysisCases(t *testing.T) []tcase {
	var out []tcase
	results := map[string]analysis.Result{
		"successful": {Value: 0.01, Samples: 1}, "failed": {Value: 0.5, Samples: 1},
		"inconclusive": {Value: 0.07, Samples: 1}, "error": {Err: errors.New("prometheus: connection refused")},
	}
	answers := func(step int) []variant {
		vs := []variant{{"no-measurements", func(s *decide.Snapshot) { s.Measurements = nil }}}
		for _, name := range sortedStrings(results) {
			r := results[name]
			vs = append(vs, variant{name, func(s *decide.Snapshot) { answerDue(s, step, r) }})
		}
		return vs
	}
	metrics := map[string]v1alpha1.AnalysisMetric{
		"success-and-failure": errorRate("result < 0.05", "result > 0.1"),
		"success-only":        errorRate("result < 0.05", ""),
		"failure-only":        errorRate("", "result > 0.1"),
	}
	for _, name := range sortedStrings(metrics) {
		w := settledWorld(t, disagg(4, 4).Rollout("1", "0").Obj())
		w.answer = measured(results["successful"])
		// Play up to the analysis step (the canary at 50%), then vary the answers.
		prefix := "partition-50%-analysis-" + name
		out = append(out, walk(t, w, prefix, both(newImage, setSteps(partitionStep("50%"), analysisStep(metrics[name]))), answers(1))...)
	}
	// Repeated measurements: count 3, interval 30s; a second pass with the same answer
	// before and after the interval.
	m := errorRate("result < 0.05", "result > 0.1")
	m.Count, m.Interval = ptr.To[int32](3), &metav1.Duration{Duration: 30 * time.Second}
	w := settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
	w.answer = measured(results["successful"])
	vs := append(answers(1), variant{"at+10s", func(s *decide.Snapshot) { s.Now = s.Now.Add(10 * time.Second) }},
		variant{"at+31s", func(s *decide.Snapshot) { s.Now = s.Now.Add(31 * time.Second) }})
	out = append(out, walk(t, w, "count-3", both(newImage, setSteps(partitionStep("50%"), analysisStep(m))), vs)...)
	// Errors in a row: one more than consecutiveErrorLimit 0 makes it inconclusive.
	m = errorRate("result < 0.05", "")
	m.ConsecutiveErrorLimit = ptr.To[int32](0)
	w = settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
	w.answer = measured(results["successful"])
	out = append(out, walk(t, w, "error-limit-0", both(newImage, setSteps(partitionStep("50%"), analysisStep(m))), answers(1))...)
	// A step of an AnalysisTemplate with an argument, then of the ClusterAnalysisTemplate
	// with the default threshold overridden (0.005: the successful answer, 0.01, fails).
	w = settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
	w.answer = measured(results["successful"])
	out = append(out, walk(t, w, "template-with-arg", both(newImage, setSteps(partitionStep("50%"), templateStep("error-rate", false, "endpoint", "generate"))), answers(1))...)
	w = settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
	w.answer = measured(results["successful"])
	out = append(out, walk(t, w, "cluster-template-threshold-arg", both(newImage, setSteps(partitionStep("50%"), templateStep("error-rate", true, "endpoint", "generate", "max", "0.005"))), []variant{allReady})...)
	// Failed analysis aborts: the workers return (played with a failing answer).
	w = settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
	w.answer = measured(results["failed"])
	out = append(out, walk(t, w, "failing", both(newImage, setSteps(partitionStep("50%"), analysisStep(errorRate("result < 0.05", "")))), []variant{allReady})...)
	return out
}

func abortCases(t *testing.T) []tcase {
	var out []tcase
	tag := func(name, k, v string) variant {
		return variant{name + "-" + v, func(s *decide.Snapshot) { setAnnotation(s.DGD, k, v) }}
	}
	abort, retry := v1alpha1.AnnotationAbort, v1alpha1.AnnotationRetry
	vs := []variant{allReady, tag("abort", abort, "2/1"), tag("abort", abort, "2/2"), tag("abort", abort, "1/1"), tag("retry", retry, "2/1")}
	for _, p := range []string{"", "50%"} {
		w := settledWorld(t, disagg(4, 4).Rollout("1", "0").Obj())
		prefix := "partition-" + p
		if p == "" {
			prefix = "no-partition"
		}
		out = append(out, walk(t, w, prefix, both(newImage, setPartition(p)), vs)...)
	}
	// Aborted at a partition, played back to the stable revision, then retried.
	w := settledWorld(t, disagg(4, 4).Rollout("1", "0").Obj())
	walk(t, w, "", both(newImage, setPartition("50%")), nil)
	out = append(out, walk(t, w, "aborted", annotate(v1alpha1.AnnotationAbort, "2/1"), []variant{allReady, newNone, oldNone})...)
	out = append(out, walk(t, w, "aborted/retried", annotate(v1alpha1.AnnotationRetry, "2/1"), []variant{allReady})...)
	out = append(out, walk(t, w, "aborted/retried/aborted-again", annotate(v1alpha1.AnnotationAbort, "2/2"), []variant{allReady})...)
	// A frontend-only change keeps the abort (same worker revision).
	out = append(out, walk(t, w, "aborted/retried/aborted-again/frontend-image", func(d *v1alpha1.DynamoGraphDeployment) {
		d.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = "frontend:2"
	}, []variant{allReady})...)
	// A new image after an abort starts a new rollout.
	out = append(out, walk(t, w, "aborted/new-image", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "img:3") }, []variant{allReady})...)
	// An abort with nothing to return to: the first deploy, then the settled graph (the
	// Warning comes again on every pass while the annotation stays: see the note).
	w = newWorld(disagg(2, 2).Obj())
	w.settle(t)
	setAnnotation(w.dgd, v1alpha1.AnnotationAbort, "1/1")
	for i := range 2 {
		s, d := w.decideFor(t)
		out = append(out, cases(fmt.Sprintf("settled-abort-1-1/pass-%d", i), s, []variant{allReady})...)
		w.apply(t, d, true)
	}
	return out
}

func scaleCases(t *testing.T) []tcase {
	var out []tcase
	changes := map[string]func(*v1alpha1.DynamoGraphDeployment){
		"decode-2-to-4":   setReplicas("decode", 4),
		"decode-2-to-1":   setReplicas("decode", 1),
		"prefill-2-to-0":  setReplicas("prefill", 0),
		"both-to-0":       both(setReplicas("prefill", 0), setReplicas("decode", 0)),
		"frontend-1-to-3": setReplicas("Frontend", 3),
	}
	for _, name := range sortedStrings(changes) {
		w := settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
		out = append(out, walk(t, w, "steady/"+name, changes[name], []variant{allReady, newNone, oldOneShort})...)
	}
	// A replica change in the middle of a rollout.
	for _, name := range []string{"decode-2-to-4", "decode-2-to-1"} {
		w := settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
		w.edit(newImage)
		w.step(t, true)
		out = append(out, walk(t, w, "mid-rollout/"+name, changes[name], []variant{allReady, newNone})...)
	}
	return out
}

func invalidCases(t *testing.T) []tcase {
	specs := map[string]func(*v1alpha1.DynamoGraphDeployment){
		"max-surge-annotation-lots": func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["decode"].Annotations = map[string]string{v1alpha1.AnnotationMaxSurge: "lots"}
		},
		"max-unavailable-annotation-negative": func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["prefill"].Annotations = map[string]string{v1alpha1.AnnotationMaxUnavailable: "-1"}
		},
		"backend-grove-unavailable": func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Backend = v1alpha1.BackendGrove },
		"step-partition-150%":       setSteps(partitionStep("150%")),
		"step-partition-raises":     setSteps(partitionStep("25%"), partitionStep("75%")),
		"analysis-condition-not-cel": setSteps(partitionStep("50%"), analysisStep(v1alpha1.AnalysisMetric{Name: "m",
			Query: "up", SuccessCondition: "result <"})),
		"analysis-query-unknown-placeholder": setSteps(partitionStep("50%"), analysisStep(v1alpha1.AnalysisMetric{Name: "m",
			Query: "up{ns=\"{{.Canary.Nope}}\"}", SuccessCondition: "result < 1"})),
		"analysis-template-missing":     setSteps(partitionStep("50%"), templateStep("error-rates", false, "endpoint", "generate")),
		"analysis-template-arg-missing": setSteps(partitionStep("50%"), templateStep("error-rate", true)),
		"budgets-both-zero-admission-refuses-planner-surges-1": func(d *v1alpha1.DynamoGraphDeployment) {
			z := intstr.FromInt32(0)
			d.Spec.Rollout.MaxSurge, d.Spec.Rollout.MaxUnavailable = &z, &z
		},
	}
	var out []tcase
	for _, name := range sortedStrings(specs) {
		// On a settled graph (the status keeps its counts), during a rollout, and on a
		// graph never deployed (no revision recorded).
		w := settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
		out = append(out, walk(t, w, "settled/"+name, both(newImage, specs[name]), []variant{allReady})...)
		w = newWorld(disagg(2, 2).Rollout("1", "0").Obj())
		specs[name](w.dgd)
		out = append(out, cases("new/"+name, w.snapshot(), []variant{allReady})...)
	}
	// Read again with the same generation: the condition stays, no Event again.
	w := settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
	w.edit(specs["max-surge-annotation-lots"])
	w.step(t, true)
	out = append(out, cases("settled/max-surge-annotation-lots/read-again", w.snapshot(), []variant{allReady})...)
	// Fixed: the graph goes on.
	out = append(out, walk(t, w, "settled/max-surge-annotation-lots/fixed", func(d *v1alpha1.DynamoGraphDeployment) {
		d.Spec.Services["decode"].Annotations = nil
	}, []variant{allReady})...)
	return out
}

func staleCases(t *testing.T) []tcase {
	var out []tcase
	w := settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
	w.edit(newImage)
	for i := range 3 {
		s, d := w.decideFor(t)
		s.Stale = s.Workloads[len(s.Workloads)-1].Name
		out = append(out, cases(fmt.Sprintf("rollout/pass-%d", i), s, []variant{allReady, newNone})...)
		w.apply(t, d, true)
	}
	// Stale with an invalid spec: the spec is checked first.
	s := w.snapshot()
	s.Stale = "g-decode-6101c065"
	s.DGD.Spec.Services["decode"].Annotations = map[string]string{v1alpha1.AnnotationMaxSurge: "lots"}
	out = append(out, cases("invalid-spec", s, []variant{allReady})...)
	return out
}

// otherOwned is an object of the given name controlled by someone else.
func otherOwned(o interface {
	SetName(string)
	SetNamespace(string)
	SetOwnerReferences([]metav1.OwnerReference)
}, name string) {
	o.SetName(name)
	o.SetNamespace("ns")
	o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "someone", UID: "other", Controller: ptr.To(true)}})
}

func conflictCases(t *testing.T) []tcase {
	var out []tcase
	// The frontend Service held by someone else, on a first deploy and on a settled graph.
	svc := corev1.Service{}
	otherOwned(&svc, "g-frontend")
	w := newWorld(disagg(2, 2).Rollout("1", "0").Obj())
	w.objects.Services = append(w.objects.Services, svc)
	out = append(out, walk(t, w, "frontend-service-taken/first-deploy", nil, []variant{allReady})...)
	// Read again with the same conflict: no second Event.
	out = append(out, cases("frontend-service-taken/read-again", w.snapshot(), []variant{allReady})...)
	// Gone: the Service is created, the conflict clears.
	w.objects.Services = nil
	out = append(out, walk(t, w, "frontend-service-taken/gone", nil, []variant{allReady})...)
	// The discovery ServiceAccount held by someone else.
	w = newWorld(disagg(2, 2).Rollout("1", "0").Obj())
	sa := &corev1.ServiceAccount{}
	otherOwned(sa, "g-k8s-service-discovery")
	w.objects.Named["ServiceAccount/g-k8s-service-discovery"] = sa
	out = append(out, walk(t, w, "service-account-taken", nil, []variant{allReady})...)

	// Names the first deploy would create objects under, held by another DGD (two
	// DGDs whose names collide): nothing is written until they are free (claim).
	other := &metav1.OwnerReference{APIVersion: "nvidia.com/v1alpha1", Kind: "DynamoGraphDeployment", Name: "llm", UID: "other", Controller: ptr.To(true)}
	w = newWorld(disagg(2, 2).Rollout("1", "0").Obj())
	w.foreign = map[decide.ObjectName]decide.Holder{
		{Kind: "Deployment", Name: "g-frontend"}: {Exists: true, Controller: other},
		{Kind: "Service", Name: "g-frontend"}:    {Exists: true, Controller: other},
	}
	s0, _ := w.decideFor(t)
	out = append(out, cases("names-held-by-another-dgd/first-deploy", s0, []variant{allReady})...)
	w.foreign = nil
	out = append(out, walk(t, w, "names-held-by-another-dgd/freed", nil, []variant{allReady})...)

	// What execute found: the outcomes a pass of a rollout can end with.
	w = settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
	w.edit(newImage)
	s, d := w.decideFor(t)
	made := madeAll(d)
	taken := backends.NotControlled("Deployment", deploymentOf("g-decode-dea4a48b"), w.dgd)
	svcTaken := backends.NotControlled("Service", &svc, w.dgd)
	outcomes := map[string]decide.Outcome{
		// The Ensure of the new pool (its first workload's name taken) is not made.
		"workload-name-taken": {Stopped: taken},
		"service-name-taken":  {Progress: made.Progress, Objects: made.Objects, Conflicts: []*backends.NameConflictError{svcTaken}},
		"spec-refused":        {Stopped: &backends.SpecError{Err: errors.New("LeaderWorkerSet.leaderworkerset.x-k8s.io \"g-decode\" is invalid: spec.leaderWorkerTemplate.size: must be at least 1")}},
		"revision-collided":   {Collided: ptr.To[int32](1)},
		// The pool made, its first discovery Service refused.
		"write-failed":       {Progress: made.Progress, Err: errors.New("creating Service ns/g-decode-dea4a48b-discovery: the server is currently unable to handle the request")},
		"write-failed-first": {Err: errors.New("creating ControllerRevision: etcdserver: request timed out")},
		// The API server refused the new pool's write for what it is (issue 23).
		"write-refused-invalid":   {Progress: made.Progress, Refused: refusals()["422"]},
		"write-refused-too-large": {Refused: refusals()["413"]},
		"write-forbidden":         {Refused: refusals()["403"]},
		"nothing-made":            {},
	}
	for _, name := range sortedStrings(outcomes) {
		o := outcomes[name]
		out = append(out, tcase{name: "rollout-start/" + name, snap: copySnapshot(s), outcome: &o})
	}
	// A workload name taken under a spec that was already stopped for it: no Event.
	w.dgd.Status.Conditions = append(w.dgd.Status.Conditions[:0:0], w.dgd.Status.Conditions...)
	rep := d.Conclude(decide.Outcome{Stopped: taken})
	w.dgd.Status = *rep.Status
	s, _ = w.decideFor(t)
	o := decide.Outcome{Stopped: taken}
	out = append(out, tcase{name: "rollout-start/workload-name-taken/again", snap: s, outcome: &o})
	return out
}

func deploymentOf(name string) *corev1.Pod {
	// Any object of that name controlled by someone else does for the message.
	p := &corev1.Pod{}
	otherOwned(p, name)
	return p
}

func backendCases(t *testing.T) []tcase {
	var out []tcase
	only := func(b v1alpha1.BackendType, d backends.Description) map[v1alpha1.BackendType]backends.Description {
		return map[v1alpha1.BackendType]backends.Description{b: d}
	}
	// LeaderWorkerSet: multinode gangs; a scale-down removes the highest index, not the
	// unready first (RemovesUnreadyFirst false).
	for _, b := range [][2]string{{"1", "0"}, {"0", "1"}} {
		w := newWorld(disagg(2, 2).Multinode("prefill", 2).Multinode("decode", 2).Rollout(b[0], b[1]).Backend(v1alpha1.BackendLeaderWorkerSet).Obj())
		w.backends = only(v1alpha1.BackendLeaderWorkerSet, lwsBackend)
		out = append(out, walk(t, w, "lws/first-deploy-"+b[0]+"-"+b[1], nil, []variant{allReady})...)
		out = append(out, walk(t, w, "lws/surge-"+b[0]+"-unavailable-"+b[1], newImage, rolloutVariants)...)
	}
	// Auto: multinode decode on a LeaderWorkerSet, single-node prefill on a Deployment.
	w := newWorld(disagg(2, 2).Multinode("decode", 2).Rollout("1", "0").Obj())
	w.backends = map[v1alpha1.BackendType]backends.Description{v1alpha1.BackendDeployment: deployment, v1alpha1.BackendLeaderWorkerSet: lwsBackend}
	w.settle(t)
	out = append(out, walk(t, w, "auto-mixed", newImage, rolloutVariants)...)
	// Grove: one PodCliqueSet per worker revision, named by the cluster (Needs.Names),
	// created whole and deleted whole; the frontend replaced side by side.
	for _, b := range [][2]string{{"1", "0"}, {"0", "1"}} {
		w := newWorld(disagg(2, 2).Rollout(b[0], b[1]).Backend(v1alpha1.BackendGrove).Obj())
		w.backends = only(v1alpha1.BackendGrove, groveBackend)
		first := walk(t, w, "grove/first-deploy-"+b[0]+"-"+b[1], nil, []variant{allReady})
		if b[0] == "1" {
			// The first pass of a first deploy without the names: Decide asks for them.
			s := w.snapshot()
			s.Names, s.Workloads, s.Revisions, s.DGD.Status = nil, nil, nil, v1alpha1.DynamoGraphDeploymentStatus{}
			out = append(out, tcase{name: "grove/first-deploy-no-names", snap: s})
		}
		out = append(out, first...)
		out = append(out, walk(t, w, "grove/surge-"+b[0]+"-unavailable-"+b[1], newImage, rolloutVariants)...)
	}
	// Grove with a backend name limit: Validate refuses a graph whose names are too long.
	w = newWorld(harness.NewDGD("ns", "a-graph-name-long-enough-to-push-grove-names-past-their-limit").Disagg(1, 1, "img:1").Backend(v1alpha1.BackendGrove).Obj())
	w.backends = only(v1alpha1.BackendGrove, groveBackend)
	out = append(out, cases("grove/names-too-long", w.snapshot(), []variant{allReady})...)
	return out
}

func deadlineCases(t *testing.T) []tcase {
	var out []tcase
	short := func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.ProgressDeadlineSeconds = ptr.To[int32](30) }
	at := func(d time.Duration, v variant) variant {
		return variant{v.name + "/at+" + d.String(), func(s *decide.Snapshot) { v.vary(s); s.Now = s.Now.Add(d) }}
	}
	vs := []variant{at(29*time.Second, newNone), at(31*time.Second, newNone), at(31*time.Second, allReady), at(31*time.Second, oldNone)}
	w := settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
	short(w.dgd)
	out = append(out, walk(t, w, "deadline-30s", newImage, vs)...)
	// Held on purpose (a partition) the deadline does not run.
	w = settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
	short(w.dgd)
	out = append(out, walk(t, w, "deadline-30s-partition-50%", both(newImage, setPartition("50%")), []variant{at(31*time.Second, allReady)})...)
	// Failed, then progress: back to InProgress.
	w = settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
	short(w.dgd)
	w.edit(newImage)
	w.step(t, false)
	w.now = w.now.Add(31 * time.Second)
	w.step(t, false)
	out = append(out, walk(t, w, "deadline-30s-failed-then-ready", nil, []variant{allReady, newNone})...)
	// Blocked: no step keeps the invariants (planner TestGoldenBlocked): prefill R=1
	// with maxSurge 0 must leave revision 1 before revision 2 can hold one, and
	// revision 1 cannot lose it while holding decode, nor lose decode (maxUnavailable 0).
	w = settledWorld(t, disagg(1, 2).Rollout("1", "0").Obj())
	w.dgd.Spec.Services["prefill"].Annotations = map[string]string{v1alpha1.AnnotationMaxSurge: "0", v1alpha1.AnnotationMaxUnavailable: "1"}
	out = append(out, walk(t, w, "blocked-tight-budgets", newImage, []variant{allReady})...)
	// ... and unblocked by a spec change of the budgets.
	out = append(out, walk(t, w, "blocked-tight-budgets/surge-1", func(d *v1alpha1.DynamoGraphDeployment) {
		d.Spec.Services["prefill"].Annotations = nil
	}, []variant{allReady})...)
	// A partition that a revision without decode cannot keep.
	w = settledWorld(t, harness.NewDGD("ns", "g").Service("prefill", v1alpha1.ComponentTypeWorker, v1alpha1.ComponentTypePrefill, 4, "img:1").Obj())
	out = append(out, walk(t, w, "blocked-partition-without-decode", both(newImage, func(d *v1alpha1.DynamoGraphDeployment) {
		harness.SetImage(d, "img:2")
		d.Spec.Services["decode"] = d.Spec.Services["prefill"].DeepCopy()
		d.Spec.Services["decode"].SubComponentType = v1alpha1.ComponentTypeDecode
		d.Spec.Services["decode"].Replicas = ptr.To[int32](2)
		d.Spec.Rollout = &v1alpha1.RolloutSpec{Partition: ptr.To(intstr.FromString("50%"))}
	}), []variant{allReady})...)
	return out
}

func historyCases(t *testing.T) []tcase {
	var out []tcase
	for _, limit := range []int32{0, 1, 2} {
		w := settledWorld(t, disagg(2, 2).Rollout("1", "0").HistoryLimit(limit).Obj())
		for i := 2; i <= 4; i++ {
			out = append(out, walk(t, w, fmt.Sprintf("limit-%d/img-%d", limit, i), func(d *v1alpha1.DynamoGraphDeployment) {
				harness.SetImage(d, fmt.Sprintf("img:%d", i))
			}, []variant{allReady})...)
		}
		// Back to the first image: its revision renumbered (or created again when pruned).
		out = append(out, walk(t, w, fmt.Sprintf("limit-%d/back-to-img-1", limit), func(d *v1alpha1.DynamoGraphDeployment) {
			harness.SetImage(d, "img:1")
		}, []variant{allReady})...)
	}
	// A change during a rollout: the intermediate revision drains first, and history
	// keeps every revision with workers.
	w := settledWorld(t, disagg(2, 2).Rollout("1", "0").HistoryLimit(1).Partition("50%").Obj())
	walk(t, w, "", newImage, nil)
	out = append(out, walk(t, w, "limit-1/retarget-during-partition", both(func(d *v1alpha1.DynamoGraphDeployment) {
		harness.SetImage(d, "img:3")
	}, setPartition("0")), []variant{allReady, newNone})...)
	// A change cause.
	w = settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
	out = append(out, walk(t, w, "change-cause", both(newImage, func(d *v1alpha1.DynamoGraphDeployment) {
		setAnnotation(d, "kubernetes.io/change-cause", "kubectl dgd set image img:2")
	}), []variant{allReady})...)
	return out
}

func unschedulableCases(t *testing.T) []tcase {
	var out []tcase
	w := settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
	w.edit(newImage)
	w.step(t, false)
	s, _ := w.decideFor(t)
	pods := []decide.UnscheduledPod{
		{Graph: "g", Service: "decode", Hash: "dea4a48b", Message: "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod."},
		{Graph: "g", Service: "prefill", Hash: "dea4a48b", Message: "0/4 nodes are available: 4 node(s) had untolerated taint {gpu: true}."},
		{Graph: "other", Service: "decode", Hash: "dea4a48b", Message: "not ours"},
	}
	list := func(name string, after time.Duration, listed bool, ps []decide.UnscheduledPod) variant {
		return variant{name, func(s *decide.Snapshot) {
			newNone.vary(s)
			s.CanListUnscheduled, s.UnscheduledListed, s.Unscheduled = true, listed, ps
			s.Now = s.Now.Add(after)
		}}
	}
	out = append(out, cases("rollout-waiting", s, []variant{
		list("before-15s", 10*time.Second, false, nil),
		list("after-15s-not-listed", 16*time.Second, false, nil),
		list("after-15s-listed-none", 16*time.Second, true, nil),
		list("after-15s-listed", 16*time.Second, true, pods),
		list("after-15s-listed-one", 16*time.Second, true, pods[:1]),
		{"cannot-list", func(s *decide.Snapshot) { newNone.vary(s); s.Now = s.Now.Add(16 * time.Second) }},
	})...)
	// Found before: listed again, the same pods give the same message and no second
	// Event; once ready, the rollout moves on and the message goes.
	s2 := copySnapshot(s)
	list("", 16*time.Second, true, pods).vary(s2)
	w.apply(t, decide.Decide(s2), false)
	s, _ = w.decideFor(t)
	out = append(out, cases("rollout-waiting/found-before", s, []variant{allReady,
		list("listed-again", 16*time.Second, true, pods)})...)
	return out
}

func stableCases(t *testing.T) []tcase {
	var out []tcase
	frontend := func(d *v1alpha1.DynamoGraphDeployment) {
		d.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = "frontend:2"
	}
	w := settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
	out = append(out, walk(t, w, "deployment/frontend-image", frontend, []variant{allReady})...)
	// A planner added and removed.
	out = append(out, walk(t, w, "deployment/planner-added", func(d *v1alpha1.DynamoGraphDeployment) {
		harness.AddService(d, "Planner", v1alpha1.ComponentTypePlanner, 1, harness.FrontendImage)
	}, []variant{allReady})...)
	out = append(out, walk(t, w, "deployment/planner-removed", func(d *v1alpha1.DynamoGraphDeployment) {
		delete(d.Spec.Services, "Planner")
	}, []variant{allReady})...)
	// Labels stripped by hand from a workload: put back.
	s := w.snapshot()
	for i := range s.Workloads {
		if s.Workloads[i].Service == "decode" {
			s.Workloads[i].Relabel = map[string]string{v1alpha1.LabelService: "decode"}
		}
	}
	out = append(out, cases("deployment/labels-stripped", s, []variant{allReady})...)
	// Side by side (Grove): the outdated frontend goes once the new one is ready.
	w = newWorld(disagg(2, 2).Rollout("1", "0").Backend(v1alpha1.BackendGrove).Obj())
	w.backends = map[v1alpha1.BackendType]backends.Description{v1alpha1.BackendGrove: groveBackend}
	w.settle(t)
	w.edit(frontend)
	delete(w.names, backends.Key{Service: "Frontend"})
	s, _ = w.decideFor(t)
	old := s.Workloads[0]
	old.Outdated = true
	fresh := old
	fresh.Outdated, fresh.Name, fresh.Group = false, "g-1-0-frontend", &backends.ObjectRef{Kind: "PodCliqueSet", Name: "g-1"}
	s.Workloads = append([]decide.Workload{old, fresh}, s.Workloads[1:]...)
	s.Names[backends.Key{Service: "Frontend"}] = fresh.Name
	newFrontend := func(name string, ready int32) variant {
		return variant{name, func(s *decide.Snapshot) { s.Workloads[1].Ready = ready }}
	}
	oldUnready := variant{"new-none-ready-old-none-ready", func(s *decide.Snapshot) { s.Workloads[0].Ready, s.Workloads[1].Ready = 0, 0 }}
	out = append(out, cases("grove/frontend-side-by-side", s, []variant{newFrontend("new-ready", 1), newFrontend("new-none-ready", 0), oldUnready})...)
	return out
}

// dynamoCases: a DGD Dynamo's operator ran, taken over (dynamo_test.go's handover):
// with Dynamo's operator still free to act (nothing written, DynamoOperatorActive), and
// each pass of the take-over once its namespace-scope Lease is held.
func dynamoCases(t *testing.T) []tcase {
	active := newHandover(harness.NewDGD("ns", "g").Disagg(2, 2, "img:1").Rollout("1", "0").Obj(), "")
	out := []tcase{{name: "dynamo-operator-active", snap: active.snapshot()}}
	grovePath := newHandover(harness.NewDGD("ns", "g").Disagg(2, 2, "img:1").Rollout("1", "0").Obj(), "Lease dynamo-operator-namespace-scope held")
	grovePath.workloads = map[string]*decide.Workload{}
	grovePath.dy.Stable, grovePath.dy.Services, grovePath.dy.Components = nil, nil, nil
	grovePath.dy.Unsupported = []backends.ObjectRef{{Kind: "PodCliqueSet", Name: "g", UID: "uid-g"}}
	out = append(out, tcase{name: "dynamo-grove-unsupported", snap: grovePath.snapshot()})
	h := newHandover(harness.NewDGD("ns", "g").Disagg(2, 2, "img:1").Rollout("1", "0").Obj(), "Lease dynamo-operator-namespace-scope held")
	for i := range 8 {
		out = append(out, tcase{name: fmt.Sprintf("take-over/pass-%d", i), snap: h.snapshot()})
		if h.dy == nil {
			break
		}
		h.pass(t)
	}
	// Dynamo's frontend Ingress: adopted in the first pass when the spec renders it; the
	// DCDs kept (DynamoIngressHeld) when it does not.
	ing := ingressHandover(true)
	for i := range 2 {
		out = append(out, tcase{name: fmt.Sprintf("take-over-ingress/pass-%d", i), snap: ing.snapshot()})
		ing.pass(t)
	}
	held := ingressHandover(false)
	for range 3 {
		held.pass(t)
	}
	out = append(out, tcase{name: "take-over-ingress-held", snap: held.snapshot()})
	// Multinode workers Dynamo's operator ran as LeaderWorkerSets (`<dcd>-0`, gangs of 2).
	g := newHandoverOn(disagg(2, 2).Multinode("prefill", 2).Multinode("decode", 2).Rollout("1", "0").Obj(),
		"Lease dynamo-operator-namespace-scope held", lws.Kind)
	g.backends = map[v1alpha1.BackendType]backends.Description{v1alpha1.BackendDeployment: deployment, v1alpha1.BackendLeaderWorkerSet: lwsBackend}
	for i := range 8 {
		out = append(out, tcase{name: fmt.Sprintf("take-over-gangs/pass-%d", i), snap: g.snapshot()})
		if g.dy == nil {
			break
		}
		g.pass(t)
	}
	// On Grove: Dynamo's PodCliqueSet `g`, its workers drained to their floor, then
	// deleted whole once ours (frontend included) are ready.
	gr := newHandoverOnGrove(disagg(2, 2).Rollout("1", "0").Backend(v1alpha1.BackendGrove).Obj(), "Lease dynamo-operator-namespace-scope held")
	for i := range 8 {
		out = append(out, tcase{name: fmt.Sprintf("take-over-grove/pass-%d", i), snap: gr.snapshot()})
		if gr.dy == nil {
			break
		}
		gr.pass(t)
	}
	return out
}

// setRestart sets spec.restart to raw JSON (Dynamo's {id, strategy}), or removes it.
func setRestart(raw string) change {
	return func(d *v1alpha1.DynamoGraphDeployment) {
		if raw == "" {
			d.Spec.Restart = nil
			return
		}
		d.Spec.Restart = &v1alpha1.Raw{}
		d.Spec.Restart.Raw = []byte(raw)
	}
}

// restartCases: spec.restart.id on a running graph (every component to a new revision:
// workers rolled, the frontend updated in place), from start to completion, under each
// strategy; the same id again and spec.restart removed (nothing rolls); superseded by
// another id and by a spec change; failed by an abort; an id set at creation.
func restartCases(t *testing.T) []tcase {
	var out []tcase
	for _, st := range []struct{ name, raw string }{
		{"sequential", `{"id":"r1"}`},
		{"sequential-order", `{"id":"r1","strategy":{"type":"Sequential","order":["Frontend","decode","prefill"]}}`},
		{"parallel", `{"id":"r1","strategy":{"type":"Parallel"}}`},
	} {
		w := settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
		vs := []variant{allReady}
		if st.name == "sequential" {
			vs = rolloutVariants
		}
		out = append(out, walk(t, w, st.name, setRestart(st.raw), vs)...)
		if st.name == "sequential" {
			out = append(out, walk(t, w, st.name+"/same-id-again", setRestart(st.raw), []variant{allReady})...)
			out = append(out, walk(t, w, st.name+"/removed", setRestart(""), []variant{allReady})...)
		}
	}
	// Superseded before it completed: by another id, by a spec change.
	for name, next := range map[string]change{"by-id": setRestart(`{"id":"r2"}`), "by-image": newImage} {
		w := settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
		w.edit(setRestart(`{"id":"r1"}`))
		w.step(t, false)
		out = append(out, walk(t, w, "superseded-"+name, next, []variant{allReady})...)
	}
	// Failed: its rollout aborted at a partition.
	w := settledWorld(t, disagg(2, 2).Rollout("1", "0").Obj())
	walk(t, w, "", both(setRestart(`{"id":"r1"}`), setPartition("50%")), nil)
	out = append(out, walk(t, w, "aborted", annotate(v1alpha1.AnnotationAbort, "2/1"), []variant{allReady})...)
	// Set when the DGD was created (Dynamo's admission refuses it; v1alpha1 may carry it).
	w = newWorld(disagg(2, 2).Rollout("1", "0").Obj())
	setRestart(`{"id":"at-create"}`)(w.dgd)
	s, _ := w.decideFor(t)
	out = append(out, cases("at-create", s, []variant{allReady})...)
	return sortCases(out)
}
