package plugin_test

import (
	"bytes"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers"
	"github.com/dgd-rollout/operator/test/harness"
)

// scrape gathers controller-runtime's registry (what the manager serves on /metrics) and
// returns, in the text exposition format, the dgd_* series of namespace ns.
func scrape(ns string) string {
	GinkgoHelper()
	families, err := ctrlmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	var buf bytes.Buffer
	for _, mf := range families {
		if !strings.HasPrefix(mf.GetName(), "dgd_") {
			continue
		}
		var kept []*dto.Metric
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "namespace" && l.GetValue() == ns {
					kept = append(kept, m)
				}
			}
		}
		if len(kept) > 0 {
			mf.Metric = kept
			_, err := expfmt.MetricFamilyToText(&buf, mf)
			Expect(err).NotTo(HaveOccurred())
		}
	}
	return buf.String()
}

// durations returns the sample count and sum of dgd_rollout_duration_seconds.
func durations() (uint64, float64) {
	GinkgoHelper()
	families, err := ctrlmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, mf := range families {
		if mf.GetName() == "dgd_rollout_duration_seconds" {
			h := mf.Metric[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	Fail("dgd_rollout_duration_seconds is not registered")
	return 0, 0
}

var _ = Describe("operator metrics", func() {
	It("counts the rollout steps of a real rollout", func() {
		ns := newNamespace()
		deploy(harness.NewDGD(ns, "steps").Disagg(2, 1, "vllm:v1").Obj())
		rollImage(ns, "steps", "vllm:v2", 2)
		Expect(scrape(ns)).To(MatchRegexp(`dgd_rollout_steps_total\{name="steps",namespace="` + ns + `"\} [1-9]`))
	})

	It("export phase, revisions kept, reconcile errors and durations through the helpers, and forget a deleted DGD", func() {
		const ns = "metrics-demo"
		controllers.ObservePhase(ns, "vllm-disagg", string(v1alpha1.RolloutInProgress))
		controllers.RolloutSteps.WithLabelValues(ns, "vllm-disagg").Add(7)
		controllers.ObserveRevisionsKept(ns, "vllm-disagg", 3)
		controllers.ObserveReconcileError(ns, "vllm-disagg")
		controllers.ObserveReconcileError(ns, "vllm-disagg")

		By("ObserveStatus: the phase, and the duration once, when endTime is first set")
		count, sum := durations()
		start := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
		end := metav1.NewTime(start.Add(42 * time.Second))
		running := &v1alpha1.DynamoGraphDeploymentStatus{RollingUpdate: &v1alpha1.RollingUpdateStatus{
			Phase: v1alpha1.RolloutInProgress, StartTime: &start}}
		done := &v1alpha1.DynamoGraphDeploymentStatus{RollingUpdate: &v1alpha1.RollingUpdateStatus{
			Phase: v1alpha1.RolloutCompleted, StartTime: &start, EndTime: &end}}
		controllers.ObserveStatus(ns, "vllm-disagg", running, done)
		controllers.ObserveStatus(ns, "vllm-disagg", done, done)
		Expect(scrape(ns)).To(ContainSubstring(`dgd_rollout_current_step{name="vllm-disagg",namespace="`+ns+`"} -1`), "no steps: -1")
		c2, s2 := durations()
		Expect(c2).To(Equal(count + 1))
		Expect(s2 - sum).To(BeNumerically("~", 42, 1e-9))
		By("ObserveStatus: the current step, 1-based, while the rollout is at one")
		atStep := &v1alpha1.DynamoGraphDeploymentStatus{RollingUpdate: &v1alpha1.RollingUpdateStatus{
			Phase: v1alpha1.RolloutPaused, StartTime: &start, CurrentStepIndex: ptr.To[int32](1), CurrentStepKind: v1alpha1.StepPause}}
		controllers.ObserveStatus("metrics-steps", "stepped", running, atStep)
		Expect(scrape("metrics-steps")).To(ContainSubstring(`dgd_rollout_current_step{name="stepped",namespace="metrics-steps"} 2`))
		atStep.RollingUpdate.CurrentStepIndex, atStep.RollingUpdate.CurrentStepKind = ptr.To[int32](3), "" // every step done
		controllers.ObserveStatus("metrics-steps", "stepped", atStep, atStep)
		Expect(scrape("metrics-steps")).To(ContainSubstring(`dgd_rollout_current_step{name="stepped",namespace="metrics-steps"} -1`))
		controllers.ForgetDGD("metrics-steps", "stepped")
		expectGolden("metrics", scrape(ns))

		By("ForgetDGD deletes every series of the DGD")
		controllers.ForgetDGD(ns, "vllm-disagg")
		Expect(scrape(ns)).To(BeEmpty())
	})
})
