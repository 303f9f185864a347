package plugin_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/harness"
)

// statusRun is the result of a "rollout status" run in the background.
type statusRun struct {
	out string
	err error
}

// statusInBackground starts kubectl dgd args in a goroutine; its result arrives on the
// returned channel when the command exits.
func statusInBackground(ns string, args ...string) <-chan statusRun {
	done := make(chan statusRun, 1)
	go func() {
		defer GinkgoRecover()
		out, err := kubectlDGD(ns, args...)
		done <- statusRun{out: out, err: err}
	}()
	return done
}

var _ = Describe("rollout status", func() {
	It("watches a rollout step by step and exits 0 when it completes", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "watch").Service("worker", v1alpha1.ComponentTypeWorker, "", 4, "vllm:v1").Rollout("1", "0").Obj()
		deploy(obj)
		t := &transcript{ns: ns}
		t.must("rollout", "status", "watch")

		change(ns, "watch", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
		_, err := env.WaitSettled(ctx, ns, "watch")
		Expect(err).NotTo(HaveOccurred())
		t.must("rollout", "status", "watch", "--watch=false")

		By("the watch follows every step env.Drive plays and ends with the rollout")
		done := statusInBackground(ns, "rollout", "status", "watch")
		Consistently(done, "300ms").ShouldNot(Receive(), "status must wait while the rollout is under way")
		_, err = env.Drive(ctx, ns, "watch", 1, 40, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
		var res statusRun
		Eventually(done, "10s").Should(Receive(&res))
		Expect(res.err).NotTo(HaveOccurred(), res.out)
		t.WriteString("$ kubectl dgd rollout status watch   # while the rollout is played step by step\n" + res.out)
		expectGolden("status-watch", t.String())
	})

	It("exits non-zero when --timeout passes first", func() {
		ns := newNamespace()
		deploy(harness.NewDGD(ns, "slow").Disagg(2, 1, "vllm:v1").Obj())
		change(ns, "slow", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
		_, err := env.WaitSettled(ctx, ns, "slow")
		Expect(err).NotTo(HaveOccurred())
		t := &transcript{ns: ns}
		start := time.Now()
		t.fails("rollout", "status", "slow", "--timeout=1s")
		Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second))
		expectGolden("status-timeout", t.String())
	})

	It("exits non-zero with the reason when the progress deadline is exceeded", func() {
		ns := newNamespace()
		deploy(harness.NewDGD(ns, "stuck").Disagg(2, 1, "vllm:v1").Obj())
		change(ns, "stuck", func(d *v1alpha1.DynamoGraphDeployment) {
			harness.SetImage(d, "vllm:broken")
			d.Spec.Rollout = &v1alpha1.RolloutSpec{ProgressDeadlineSeconds: ptr.To[int32](2)}
		})
		_, err := env.WaitSettled(ctx, ns, "stuck")
		Expect(err).NotTo(HaveOccurred())
		done := statusInBackground(ns, "rollout", "status", "stuck", "--timeout=60s")
		var res statusRun
		Eventually(done, "20s").Should(Receive(&res))
		Expect(res.err).To(MatchError(ContainSubstring("exceeded its progress deadline")))
		expectGolden("status-deadline", "$ kubectl dgd rollout status stuck --timeout=60s\n"+res.out)
	})

	It("reports a rollout held at its partition as complete, and a paused one as waiting", func() {
		ns := newNamespace()
		deploy(harness.NewDGD(ns, "canary").Disagg(4, 2, "vllm:v1").Partition("50%").Obj())
		change(ns, "canary", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
		_, err := env.Drive(ctx, ns, "canary", -1, 20, harness.PhaseIs(v1alpha1.RolloutPaused, "Partitioned"))
		Expect(err).NotTo(HaveOccurred())
		t := &transcript{ns: ns}
		t.must("rollout", "status", "canary")

		By("paused, then partition 0: status waits and says why")
		t.must("rollout", "pause", "canary")
		t.must("rollout", "partition", "canary", "0")
		_, err = env.WaitSettled(ctx, ns, "canary")
		Expect(err).NotTo(HaveOccurred())
		t.must("rollout", "status", "canary", "--watch=false")
		t.must("rollout", "resume", "canary")
		_, err = env.Drive(ctx, ns, "canary", -1, 20, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
		t.must("rollout", "status", "canary")
		expectGolden("status-partition", t.String())
	})
})
