package plugin_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/harness"
)

// rolloutSpec returns the live spec.rollout with defaults.
func rolloutSpec(ns, name string) v1alpha1.RolloutSpec {
	return getDGD(ns, name).RolloutOrDefault()
}

var _ = Describe("rollout pause, resume, partition and promote", func() {
	It("patch spec.rollout and say what they did", func() {
		ns := newNamespace()
		deploy(harness.NewDGD(ns, "knobs").Disagg(4, 2, "vllm:v1").Obj())
		t := &transcript{ns: ns}

		t.must("rollout", "pause", "knobs")
		Expect(rolloutSpec(ns, "knobs").Paused).To(BeTrue())
		t.must("rollout", "pause", "knobs")
		t.must("rollout", "resume", "knobs")
		Expect(rolloutSpec(ns, "knobs").Paused).To(BeFalse())
		t.must("rollout", "resume", "knobs")

		t.must("rollout", "partition", "knobs", "50%")
		Expect(*rolloutSpec(ns, "knobs").Partition).To(Equal(intstr.FromString("50%")))
		t.must("rollout", "partition", "knobs", "2")
		Expect(*rolloutSpec(ns, "knobs").Partition).To(Equal(intstr.FromInt32(2)))
		t.must("rollout", "partition", "knobs", "2")
		t.fails("rollout", "partition", "knobs", "half")
		t.fails("rollout", "partition", "knobs", "101%")
		t.fails("rollout", "partition", "knobs", "--", "-1")
		Expect(*rolloutSpec(ns, "knobs").Partition).To(Equal(intstr.FromInt32(2)))

		t.must("rollout", "pause", "knobs")
		t.must("rollout", "promote", "knobs")
		r := rolloutSpec(ns, "knobs")
		Expect(r.Paused).To(BeFalse())
		Expect(*r.Partition).To(Equal(intstr.FromInt32(0)))
		t.must("rollout", "promote", "knobs")
		expectGolden("knobs", t.String())
	})

	It("run a canary: partition, check, promote", func() {
		ns := newNamespace()
		deploy(harness.NewDGD(ns, "canary").Disagg(4, 2, "vllm:v1").Obj())
		t := &transcript{ns: ns}
		t.must("rollout", "partition", "canary", "1")
		change(ns, "canary", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
		steps, err := env.Drive(ctx, ns, "canary", -1, 20, harness.PhaseIs(v1alpha1.RolloutPaused, "Partitioned"))
		Expect(err).NotTo(HaveOccurred())
		held := steps[len(steps)-1].DGD.Status.Services
		Expect([]int32{held["prefill"].UpdatedReplicas, held["decode"].UpdatedReplicas}).To(Equal([]int32{3, 1}),
			"partition 1 of R_max 4 keeps 1 prefill and 1 decode on the old revision")
		t.must("rollout", "status", "canary")
		t.must("rollout", "promote", "canary")
		_, err = env.Drive(ctx, ns, "canary", -1, 20, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
		t.must("rollout", "status", "canary")
		expectGolden("canary", t.String())
	})
})
