package deployment_test

import (
	"errors"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/test/prom"
)

// errorRate is an analysis step whose one metric, "errors", compares the canary's
// error ratio with 5%, every second, count times, tolerating failureLimit failures.
func errorRate(count, failureLimit int32) v1alpha1.RolloutStep {
	return v1alpha1.RolloutStep{Analysis: &v1alpha1.RolloutAnalysis{Metrics: []v1alpha1.AnalysisMetric{{
		Name:             "errors",
		Query:            `error_ratio{dynamo_namespace="{{.Canary.MetricsNamespace}}",stable="{{.Stable.Namespace}}"}`,
		SuccessCondition: "result < 0.05",
		Interval:         &metav1.Duration{Duration: time.Second},
		Count:            &count,
		FailureLimit:     &failureLimit,
	}}}}
}

// canaryAnswers answers the canary's queries (those naming the worker hash of the
// revision being rolled out, sanitized as the runtime's metrics label it) with canary
// and every other query with 0.
func canaryAnswers(canaryHash string, canary analysis.Result) func(string) analysis.Result {
	return func(q string) analysis.Result {
		if strings.Contains(q, "_"+canaryHash+`"`) {
			return canary
		}
		return harness.Value(0)
	}
}

// eventsOf are the notes of a DGD's Events with reason, oldest first, with their type.
func eventsOf(ns, dgd, reason string) []string {
	var evs eventsv1.EventList
	Expect(env.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range evs.Items {
		if e.Regarding.Name == dgd && e.Reason == reason {
			out = append(out, e.Type+": "+e.Note)
		}
	}
	return out
}

// deployCanary deploys prefill 4 / decode 2 at vllm:v1 whose rollouts hold 50% of
// every worker service on the stable revision, then run step.
func deployCanary(ns, name string, step v1alpha1.RolloutStep) harness.Snapshot {
	obj := harness.NewDGD(ns, name).Disagg(4, 2, "vllm:v1").Obj()
	obj.Spec.Rollout = &v1alpha1.RolloutSpec{Steps: []v1alpha1.RolloutStep{partitionStep("50%"), step}}
	return deploy(obj)
}

// canaryHashOf is the worker hash the spec's workers would have after change.
func canaryHashOf(ns, name string) string {
	d := &v1alpha1.DynamoGraphDeployment{}
	Expect(env.Client.Get(ctx, keyOf(ns, name), d)).To(Succeed())
	return d.Status.UpdateWorkerHash
}

var _ = Describe("analysis steps and aborts", func() {
	It("measure a canary at each analysis step and complete once every metric passed", func() {
		ns := newNamespace()
		first := deployCanary(ns, "healthy", errorRate(2, 0))
		env.Metrics.Answer(func(string) analysis.Result { return harness.Value(0.01) })
		update(ns, "healthy", harness.Image("vllm:v2"))

		steps, err := env.Drive(ctx, ns, "healthy", -1, 30, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
		s := steps[len(steps)-1]
		ru := s.DGD.Status.RollingUpdate
		Expect(ru.Analyses).To(HaveLen(1))
		run := ru.Analyses[0]
		Expect(run.Step).To(Equal(int32(1)))
		Expect(run.Phase).To(Equal(v1alpha1.AnalysisSuccessful))
		Expect(run.Metrics).To(HaveLen(1))
		Expect(run.Metrics[0].Successful).To(Equal(int32(2)))
		Expect(run.Metrics[0].Measurements).To(HaveLen(2))
		Expect(run.Metrics[0].Measurements[0].Value).To(Equal("0.01"))
		gap := run.Metrics[0].Measurements[1].Time.Sub(run.Metrics[0].Measurements[0].Time.Time)
		Expect(gap).To(BeNumerically(">=", time.Second), "measurements an interval apart")

		By("the queries name the canary's and the stable's Dynamo namespaces as Dynamo's metrics label them")
		canary := strings.ReplaceAll(fmt.Sprintf("%s-healthy-%s", ns, s.UpdateHash()), "-", "_")
		stable := fmt.Sprintf("%s-healthy-%s", ns, first.UpdateHash())
		Expect(env.Metrics.Queries()).To(ContainElement(fmt.Sprintf(`error_ratio{dynamo_namespace=%q,stable=%q}`, canary, stable)))
		Eventually(func() []string { return eventsOf(ns, "healthy", v1alpha1.EventAnalysisSucceeded) }).Should(ConsistOf(
			ContainSubstring(`revision 2: step 2/2: metric "errors" passed: 2 of 2 measurement(s) successful; last value 0.01`)))
		Eventually(func() []string { return stepEvents(ns, "healthy") }).Should(ContainElement("revision 2: step 2/2 analysis passed"))
	})

	It("abort on a failed metric: every worker returns to the stable revision within the budgets, and a retry starts again", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "bad").Disagg(4, 2, "vllm:v1").Rollout("1", "0").Obj()
		obj.Spec.Rollout.Steps = []v1alpha1.RolloutStep{partitionStep("50%"), errorRate(3, 1), partitionStep("0%")}
		first := deploy(obj)
		stable := first.UpdateHash()
		update(ns, "bad", harness.Image("vllm:v2"))
		Eventually(func() string { return canaryHashOf(ns, "bad") }).ShouldNot(Equal(stable))
		canary := canaryHashOf(ns, "bad")
		env.Metrics.Answer(canaryAnswers(canary, harness.Value(0.3)))

		By("the second failed measurement (failureLimit 1) aborts; the workers move back under the invariants Drive checks at every step")
		aborted := func(s harness.Snapshot) bool {
			return harness.PhaseIs(v1alpha1.RolloutAborted, v1alpha1.ReasonAnalysisFailed)(s) && s.DGD.Status.RollingUpdate.EndTime != nil
		}
		steps, err := env.Drive(ctx, ns, "bad", -1, 40, aborted)
		Expect(err).NotTo(HaveOccurred())
		s := steps[len(steps)-1]
		Expect(s.Hashes()).To(Equal([]string{stable}), "the canary is gone")
		Expect(s.Pool(stable)).To(Equal(map[string]int32{"prefill": 4, "decode": 2}))
		st := s.DGD.Status
		Expect(st.CurrentRevision).To(Equal(first.DGD.Status.UpdateRevision))
		Expect(st.UpdateRevisionNumber).To(Equal(int64(2)), "the spec is not changed")
		Expect(st.RollingUpdate.Abort).NotTo(BeNil())
		Expect(st.RollingUpdate.Abort.Message).To(ContainSubstring(`step 2/3: metric "errors" failed: 2 failed measurement(s), more than failureLimit 1; last value 0.3`))
		Expect(st.RollingUpdate.CurrentStepIndex).To(HaveValue(Equal(int32(1))), "the steps stay where they stopped")
		Expect(st.RollingUpdate.Analyses[0].Phase).To(Equal(v1alpha1.AnalysisFailed))
		Expect(st.RollingUpdate.Analyses[0].Metrics[0].Failed).To(Equal(int32(2)))
		for cond, want := range map[string]metav1.ConditionStatus{"Stalled": metav1.ConditionTrue, "Ready": metav1.ConditionFalse, "Progressing": metav1.ConditionFalse, "Reconciling": metav1.ConditionFalse, "Available": metav1.ConditionTrue} {
			c := conditionOf(&s.DGD, cond)
			Expect(c).NotTo(BeNil(), cond)
			Expect(c.Status).To(Equal(want), "%s: %s", cond, c.Message)
		}
		Expect(conditionOf(&s.DGD, "Stalled").Reason).To(Equal(v1alpha1.ReasonAnalysisFailed))
		Eventually(func() []string { return eventsOf(ns, "bad", v1alpha1.EventAnalysisFailed) }).Should(ConsistOf(
			And(HavePrefix("Warning: revision 2 aborted: step 2/3: metric \"errors\" failed"), ContainSubstring("last value 0.3"), HaveSuffix("every worker returns to revision 1"))))
		Eventually(func() []string { return eventsOf(ns, "bad", v1alpha1.EventRolloutAbortCompleted) }).Should(HaveLen(1))

		By("nothing moves while aborted, until a retry of that attempt with a healthy canary completes the rollout from its first step")
		again, err := env.WaitSettled(ctx, ns, "bad")
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Hashes()).To(Equal([]string{stable}))
		env.Metrics.Answer(canaryAnswers(canary, harness.Value(0.01)))
		update(ns, "bad", func(d *v1alpha1.DynamoGraphDeployment) {
			metav1.SetMetaDataAnnotation(&d.ObjectMeta, v1alpha1.AnnotationRetry, "2/1")
		})
		steps, err = env.Drive(ctx, ns, "bad", -1, 40, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
		ru := steps[len(steps)-1].DGD.Status.RollingUpdate
		Expect(ru.Attempt).To(Equal(int32(2)))
		Expect(ru.Abort).To(BeNil())
		Expect(ru.Analyses).To(HaveLen(1))
		Expect(ru.Analyses[0].Phase).To(Equal(v1alpha1.AnalysisSuccessful), "attempt 2 measured afresh")
		Eventually(func() []string { return eventsOf(ns, "bad", v1alpha1.EventRolloutRetried) }).Should(ConsistOf("Normal: revision 2: attempt 2 starts from the first step"))
	})

	It("abort by hand mid-rollout (no steps) returns to the stable revision; a new worker revision rolls out", func() {
		ns := newNamespace()
		first := deploy(harness.NewDGD(ns, "manual").Disagg(4, 2, "vllm:v1").Rollout("1", "0").Obj())
		stable := first.UpdateHash()
		update(ns, "manual", harness.Image("vllm:v2"))
		steps, err := env.Drive(ctx, ns, "manual", -1, 20, func(s harness.Snapshot) bool {
			return s.UpdateHash() != stable && s.Pool(s.UpdateHash())["prefill"] >= 2
		})
		Expect(err).NotTo(HaveOccurred())
		canary := steps[len(steps)-1].UpdateHash()
		update(ns, "manual", func(d *v1alpha1.DynamoGraphDeployment) {
			metav1.SetMetaDataAnnotation(&d.ObjectMeta, v1alpha1.AnnotationAbort, "2/1")
		})
		steps, err = env.Drive(ctx, ns, "manual", -1, 30, func(s harness.Snapshot) bool {
			return harness.PhaseIs(v1alpha1.RolloutAborted, v1alpha1.ReasonRolloutAborted)(s) && s.DGD.Status.RollingUpdate.EndTime != nil
		})
		Expect(err).NotTo(HaveOccurred())
		s := steps[len(steps)-1]
		Expect(s.Hashes()).To(Equal([]string{stable}))
		Expect(s.DGD.Status.RollingUpdate.Message).To(Equal("aborted by a person (kubectl dgd rollout abort); every worker is back on revision 1"))
		Expect(s.DGD.Status.RollingUpdate.Attempt).To(Equal(int32(1)))
		Eventually(func() []string { return eventsOf(ns, "manual", v1alpha1.EventRolloutAborted) }).Should(ConsistOf(
			"Warning: revision 2 aborted: aborted by a person (kubectl dgd rollout abort); every worker returns to revision 1"))

		By("a new worker revision starts a new rollout; the abort annotation names revision 2 and does nothing to it")
		update(ns, "manual", harness.Image("vllm:v3"))
		steps, err = env.Drive(ctx, ns, "manual", -1, 30, harness.CompletedAt(3))
		Expect(err).NotTo(HaveOccurred())
		s = steps[len(steps)-1]
		Expect(s.DGD.Status.RollingUpdate.Abort).To(BeNil())
		Expect(s.Hashes()).NotTo(ContainElements(stable, canary))
	})

	It("hold an inconclusive analysis (queries that keep failing) until it is promoted, never passing it", func() {
		ns := newNamespace()
		step := errorRate(2, 0)
		limit := int32(1)
		step.Analysis.Metrics[0].ConsecutiveErrorLimit = &limit
		first := deployCanary(ns, "blind", step)
		env.Metrics.Answer(func(string) analysis.Result {
			return analysis.Result{Err: errors.New(`querying Prometheus: Post "http://127.0.0.1:9/api/v1/query": dial tcp 127.0.0.1:9: connect: connection refused`)}
		})
		update(ns, "blind", harness.Image("vllm:v2"))
		steps, err := env.Drive(ctx, ns, "blind", -1, 30, harness.PhaseIs(v1alpha1.RolloutPaused, v1alpha1.ReasonAnalysisInconclusive))
		Expect(err).NotTo(HaveOccurred())
		s := steps[len(steps)-1]
		Expect(s.Pool(first.UpdateHash())).To(Equal(map[string]int32{"prefill": 2, "decode": 1}), "held at 50%")
		ru := s.DGD.Status.RollingUpdate
		Expect(ru.Message).To(ContainSubstring("step 2/2: analysis inconclusive, promote or abort: metric \"errors\" is inconclusive: 2 queries in a row erred, more than consecutiveErrorLimit 1; last: querying Prometheus"))
		Expect(ru.Analyses[0].Metrics[0].Error).To(Equal(int32(2)))
		Expect(ru.Analyses[0].Metrics[0].Measurements[0].Message).To(ContainSubstring("connection refused"))
		Expect(conditionOf(&s.DGD, "Ready").Reason).To(Equal(v1alpha1.ReasonAnalysisInconclusive))
		Eventually(func() []string { return eventsOf(ns, "blind", v1alpha1.EventAnalysisInconclusive) }).Should(HaveLen(1))
		asked := len(env.Metrics.Queries())

		By("Prometheus answering again does not pass an inconclusive analysis; a promotion does")
		env.Metrics.Answer(func(string) analysis.Result { return harness.Value(0.01) })
		again, err := env.WaitSettled(ctx, ns, "blind")
		Expect(err).NotTo(HaveOccurred())
		Expect(again.DGD.Status.RollingUpdate.Reason).To(Equal(v1alpha1.ReasonAnalysisInconclusive))
		update(ns, "blind", func(d *v1alpha1.DynamoGraphDeployment) {
			metav1.SetMetaDataAnnotation(&d.ObjectMeta, v1alpha1.AnnotationPromote, "2/2")
		})
		_, err = env.Drive(ctx, ns, "blind", -1, 20, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
		Expect(env.Metrics.Queries()).To(HaveLen(asked), "an inconclusive analysis measures no more")
	})

	It("query off the pass: a Prometheus that never answers one DGD's analysis holds none of its passes, and another DGD rolls out meanwhile", func() {
		// The operator has one Prometheus for every DGD (--prometheus-url) and an
		// analysis cannot name its own (spec.rollout.steps[].analysis has no address):
		// the queries of "held" carry a marker that routes them, through the real
		// Prometheus client and its default timeout, to a server that accepts the
		// connection and never answers.
		hole, err := prom.StartBlackhole()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(hole.Close)
		client, err := analysis.NewPrometheus(hole.URL)
		Expect(err).NotTo(HaveOccurred())
		const marker = `blackholed="yes"`
		env.Metrics.Route(marker, client)
		DeferCleanup(func() { env.Metrics.Route(marker, nil) })

		ns := newNamespace()
		step := errorRate(2, 0)
		step.Analysis.Metrics[0].Query = `error_ratio{dynamo_namespace="{{.Canary.MetricsNamespace}}",` + marker + `}`
		step.Analysis.Metrics[0].ConsecutiveErrorLimit = ptr.To[int32](0)
		deployCanary(ns, "held", step)
		first := deploy(harness.NewDGD(ns, "free").Disagg(2, 1, "vllm:v1").Obj())

		By("held's analysis step asks for its measurement: the query hangs at the blackhole")
		since := time.Now()
		update(ns, "held", harness.Image("vllm:v2"))
		_, err = env.Drive(ctx, ns, "held", -1, 20, harness.PhaseIs(v1alpha1.RolloutPaused, v1alpha1.ReasonAnalysisRunning))
		Expect(err).NotTo(HaveOccurred())
		Eventually(hole.Accepted).Should(BeNumerically(">=", 1))
		hung := time.Now()

		By("free rolls out to its new revision while held's query still hangs")
		update(ns, "free", harness.Image("vllm:v2"))
		steps, err := env.Drive(ctx, ns, "free", -1, 30, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
		Expect(steps[len(steps)-1].Hashes()).NotTo(ContainElement(first.UpdateHash()))
		took := time.Since(hung)
		held := getDGD(ns, "held").Status.RollingUpdate
		Expect(held.Reason).To(Equal(v1alpha1.ReasonAnalysisRunning))
		Expect(held.Analyses).To(HaveLen(1))
		Expect(held.Analyses[0].Metrics).To(ConsistOf(And(HaveField("Phase", v1alpha1.AnalysisRunning), HaveField("Error", int32(0)),
			HaveField("Measurements", BeEmpty()))), "no measurement of held recorded yet: its query still hangs")
		Expect(took).To(BeNumerically("<", analysis.QueryTimeout), "free's whole rollout ran within one query's timeout")
		longest, passes := env.LongestPassSince(ns, "held", since)
		GinkgoWriter.Printf("free rolled out in %s while held's query hung; held's longest of %d passes took %s\n", took, passes, longest)
		Expect(passes).To(BeNumerically(">=", 1))
		Expect(longest).To(BeNumerically("<", 2*time.Second), "no pass of held waits for its query")

		By("the query times out: held's analysis records the error and, past consecutiveErrorLimit 0, is inconclusive")
		Eventually(func() *v1alpha1.RollingUpdateStatus { return getDGD(ns, "held").Status.RollingUpdate }).
			WithTimeout(analysis.QueryTimeout + 20*time.Second).Should(And(
			HaveField("Reason", v1alpha1.ReasonAnalysisInconclusive),
			HaveField("Message", ContainSubstring("1 queries in a row erred, more than consecutiveErrorLimit 0; last: querying Prometheus"))))
		ru := getDGD(ns, "held").Status.RollingUpdate
		Expect(ru.Analyses[0].Metrics[0].Error).To(Equal(int32(1)))
		Expect(ru.Analyses[0].Metrics[0].Measurements[0].Message).To(ContainSubstring("deadline"))
		Expect(ru.Analyses[0].Metrics[0].Measurements[0].Time.Time).To(BeTemporally("<", hung), "recorded at the instant its query was asked for")
		longest, _ = env.LongestPassSince(ns, "held", since)
		Expect(longest).To(BeNumerically("<", 2*time.Second))
	})

	It("start the steps again for a newer revision made during an analysis, draining the one under analysis", func() {
		ns := newNamespace()
		first := deployCanary(ns, "retarget", errorRate(1000, 0))
		env.Metrics.Answer(func(string) analysis.Result { return harness.Value(0.01) })
		update(ns, "retarget", harness.Image("vllm:v2"))
		_, err := env.Drive(ctx, ns, "retarget", -1, 20, harness.PhaseIs(v1alpha1.RolloutPaused, v1alpha1.ReasonAnalysisRunning))
		Expect(err).NotTo(HaveOccurred())
		update(ns, "retarget", harness.Image("vllm:v3"))
		steps, err := env.Drive(ctx, ns, "retarget", -1, 30, func(s harness.Snapshot) bool {
			return s.DGD.Status.UpdateRevisionNumber == 3 && harness.PhaseIs(v1alpha1.RolloutPaused, v1alpha1.ReasonAnalysisRunning)(s)
		})
		Expect(err).NotTo(HaveOccurred())
		s := steps[len(steps)-1]
		Expect(s.Hashes()).To(ConsistOf(first.UpdateHash(), s.UpdateHash()), "revision 2 drained, the stable kept")
		Expect(s.Pool(s.UpdateHash())).To(Equal(map[string]int32{"prefill": 2, "decode": 1}), "revision 3 held at step 1's 50%")
		// The step's first measurement lands off the pass (the analysis runner), so the
		// status that first says AnalysisRunning may record none yet.
		Eventually(func(g Gomega) {
			ru := getDGD(ns, "retarget").Status.RollingUpdate
			g.Expect(ru.Analyses).To(HaveLen(1))
			g.Expect(ru.Analyses[0].Metrics).NotTo(BeEmpty())
			g.Expect(ru.Analyses[0].Metrics[0].Measurements).NotTo(BeEmpty())
			g.Expect(ru.Analyses[0].Metrics[0].Measurements[0].Time.Time).To(BeTemporally(">=", ru.StartTime.Time), "measured afresh for revision 3")
		}).Should(Succeed())
	})

	It("skip the steps of an undo to the stable revision: the workers return at once", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "undo").Disagg(4, 2, "vllm:v1").Obj()
		obj.Spec.Rollout = &v1alpha1.RolloutSpec{Steps: []v1alpha1.RolloutStep{partitionStep("50%"), {Pause: &v1alpha1.RolloutPause{}}}}
		first := deploy(obj)
		update(ns, "undo", harness.Image("vllm:v2"))
		_, err := env.Drive(ctx, ns, "undo", -1, 20, atStep(1))
		Expect(err).NotTo(HaveOccurred())
		update(ns, "undo", harness.Image("vllm:v1"))
		steps, err := env.Drive(ctx, ns, "undo", -1, 20, harness.CompletedAt(3))
		Expect(err).NotTo(HaveOccurred())
		s := steps[len(steps)-1]
		Expect(s.UpdateHash()).To(Equal(first.UpdateHash()))
		Expect(s.DGD.Status.RollingUpdate.CurrentStepIndex).To(HaveValue(Equal(int32(2))))
		Eventually(func() []string { return eventsOf(ns, "undo", v1alpha1.EventRolloutStepsSkipped) }).Should(ConsistOf(
			HavePrefix("Normal: revision 3 has the workers of the stable revision")))
	})
})
