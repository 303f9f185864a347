package plugin_test

import (
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/test/harness"
)

// atStep is a Drive predicate: the rollout to revision rev is at step i (0-based).
func atStep(rev int64, i int32) func(harness.Snapshot) bool {
	return func(s harness.Snapshot) bool {
		ru := s.DGD.Status.RollingUpdate
		return s.DGD.Status.UpdateRevisionNumber == rev && ru != nil && ru.CurrentStepIndex != nil && *ru.CurrentStepIndex == i
	}
}

var _ = Describe("rollout promote with spec.rollout.steps", func() {
	It("ends the current step, or with --full every step", func() {
		ns := newNamespace()
		half := intstr.FromString("50%")
		obj := harness.NewDGD(ns, "stepped").Disagg(4, 2, "vllm:v1").Obj()
		obj.Spec.Rollout = &v1alpha1.RolloutSpec{Steps: []v1alpha1.RolloutStep{{Partition: &half}, {Pause: &v1alpha1.RolloutPause{}}, {Pause: &v1alpha1.RolloutPause{}}}}
		deploy(obj)
		t := &transcript{ns: ns}

		change(ns, "stepped", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
		_, err := env.Drive(ctx, ns, "stepped", -1, 20, atStep(2, 1))
		Expect(err).NotTo(HaveOccurred())
		t.must("rollout", "status", "stepped", "--watch=false")
		t.must("rollout", "promote", "stepped")
		_, err = env.Drive(ctx, ns, "stepped", -1, 20, atStep(2, 2))
		Expect(err).NotTo(HaveOccurred())
		t.must("rollout", "promote", "stepped")
		_, err = env.Drive(ctx, ns, "stepped", -1, 20, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
		t.must("rollout", "promote", "stepped")

		change(ns, "stepped", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v3") })
		_, err = env.Drive(ctx, ns, "stepped", -1, 20, atStep(3, 1))
		Expect(err).NotTo(HaveOccurred())
		t.must("rollout", "promote", "stepped", "--full")
		_, err = env.Drive(ctx, ns, "stepped", -1, 20, harness.CompletedAt(3))
		Expect(err).NotTo(HaveOccurred())
		Expect(getDGD(ns, "stepped").Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationPromote, "3/full"))
		t.fails("rollout", "partition", "stepped", "25%")
		expectGolden("steps", t.String())
	})
})

var _ = Describe("rollout abort and retry", func() {
	It("abort an inconclusive analysis back to the stable revision, then retry it to completion", func() {
		ns := newNamespace()
		half := intstr.FromString("50%")
		count, limit := int32(2), int32(1)
		obj := harness.NewDGD(ns, "canary").Disagg(4, 2, "vllm:v1").Obj()
		obj.Spec.Rollout = &v1alpha1.RolloutSpec{Steps: []v1alpha1.RolloutStep{{Partition: &half}, {Analysis: &v1alpha1.RolloutAnalysis{
			Metrics: []v1alpha1.AnalysisMetric{{Name: "error-rate", Query: `errors{ns="{{.Canary.MetricsNamespace}}"}`, SuccessCondition: "result < 0.05",
				Interval: &metav1.Duration{Duration: time.Second}, Count: &count, ConsecutiveErrorLimit: &limit}}}}}}
		deploy(obj)
		t := &transcript{ns: ns}
		t.fails("rollout", "abort", "canary")
		t.fails("rollout", "retry", "canary")

		env.Metrics.Answer(func(string) analysis.Result {
			return analysis.Result{Err: errors.New("querying Prometheus: connection refused")}
		})
		change(ns, "canary", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
		_, err := env.Drive(ctx, ns, "canary", -1, 20, harness.PhaseIs(v1alpha1.RolloutPaused, v1alpha1.ReasonAnalysisInconclusive))
		Expect(err).NotTo(HaveOccurred())
		t.must("rollout", "status", "canary", "--watch=false")
		t.must("rollout", "abort", "canary")
		_, err = env.Drive(ctx, ns, "canary", -1, 20, func(s harness.Snapshot) bool {
			return harness.PhaseIs(v1alpha1.RolloutAborted, v1alpha1.ReasonRolloutAborted)(s) && s.DGD.Status.RollingUpdate.EndTime != nil
		})
		Expect(err).NotTo(HaveOccurred())
		t.fails("rollout", "status", "canary", "--watch=false")
		t.must("rollout", "abort", "canary")

		env.Metrics.Answer(func(string) analysis.Result { return harness.Value(0.01) })
		t.must("rollout", "retry", "canary")
		_, err = env.Drive(ctx, ns, "canary", -1, 30, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
		t.must("rollout", "status", "canary", "--watch=false")
		t.fails("rollout", "retry", "canary")
		Expect(getDGD(ns, "canary").Annotations).To(And(HaveKeyWithValue(v1alpha1.AnnotationAbort, "2/1"), HaveKeyWithValue(v1alpha1.AnnotationRetry, "2/1")))
		expectGolden("abort", t.String())
	})
})
