package plugin_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
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
