package reliability_test

import (
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/revisions"
	"github.com/dgd-rollout/operator/test/harness"
)

// The Deployment suite's main scenarios, with a share of the operator's writes failing.
// Every scenario must converge with surge, availability and ratio held at every settled
// step, and surge held at every Deployment event in between.

// maxSteps is generous: a failed pass is retried, and its retry can land after the
// harness has played one more step.
const maxSteps = 200

var _ = Describe("image change under write faults", func() {
	for _, tc := range []struct {
		name  string
		build func(ns string) *v1alpha1.DynamoGraphDeployment
		grow  int32
	}{
		{"disaggregated P=4/D=2, defaults, one replica ready per step", func(ns string) *v1alpha1.DynamoGraphDeployment {
			return harness.NewDGD(ns, "disagg").Disagg(4, 2, "vllm:v1").Obj()
		}, 1},
		{"disaggregated P=8/D=4, maxSurge 1, maxUnavailable 0", func(ns string) *v1alpha1.DynamoGraphDeployment {
			return harness.NewDGD(ns, "disagg-s1").Disagg(8, 4, "vllm:v1").Rollout("1", "0").Obj()
		}, -1},
	} {
		It("rolls "+tc.name+" to completion with every invariant at every step", func() {
			withFaults(func() {
				ns := newNamespace()
				obj := tc.build(ns)
				old := deploy(obj).Hashes()[0]
				sw := watchSurge(ns, obj.Name)
				update(ns, obj.Name, func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
				steps, err := drive(ns, obj.Name, tc.grow, maxSteps, harness.CompletedAt(2))
				Expect(err).NotTo(HaveOccurred())
				sw.expectNoSurge()
				last := steps[len(steps)-1]
				Expect(last.Hashes()).To(HaveLen(1))
				Expect(last.Hashes()[0]).NotTo(Equal(old))
				for _, w := range last.Workloads {
					Expect(w.Spec).To(Equal(*last.DGD.Spec.Services[w.Service].Replicas))
				}
				Expect(slices.ContainsFunc(steps, func(s harness.Snapshot) bool { return len(s.Hashes()) == 2 })).To(BeTrue(),
					"both pools must have existed side by side")
				By("the drained revision's Deployments are deleted, and nothing else is left behind")
				Eventually(func() []string { s, _ := env.Take(ctx, ns, obj.Name); return s.Hashes() }).Should(HaveLen(1))
				Eventually(func() int { return len(deploymentsInNamespace(ns)) }).Should(Equal(3))
				Expect(controllerRevisions(ns)).To(HaveLen(2))
				expectNothingLeft(ns, obj.Name, 2)
			})
		})
	}
})

var _ = Describe("partition under write faults", func() {
	for _, p := range []string{"50%", "2"} {
		It("holds P=4/D=2 at partition "+p+", then completes at 0", func() {
			withFaults(func() {
				ns := newNamespace()
				obj := harness.NewDGD(ns, "canary").Disagg(4, 2, "vllm:v1").Partition(p).Obj()
				old := deploy(obj).Hashes()[0]
				sw := watchSurge(ns, "canary")
				update(ns, "canary", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
				steps, err := drive(ns, "canary", -1, maxSteps, harness.PhaseIs(v1alpha1.RolloutPaused, "Partitioned"))
				Expect(err).NotTo(HaveOccurred())
				held := steps[len(steps)-1]
				Expect(held.Pool(old)).To(Equal(map[string]int32{"prefill": 2, "decode": 1}))
				Expect(held.Pool(held.UpdateHash())).To(Equal(map[string]int32{"prefill": 2, "decode": 1}))

				By("the hold is stable: more readiness changes nothing")
				_, err = env.PlayDeployments(ctx, ns, "canary", -1)
				Expect(err).NotTo(HaveOccurred())
				again, err := waitSettled(ns, "canary")
				Expect(err).NotTo(HaveOccurred())
				Expect(again.Replicas()).To(Equal(held.Replicas()))

				By("promoting: partition 0 completes the rollout")
				update(ns, "canary", func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Partition = ptrIntStr("0") })
				steps, err = drive(ns, "canary", -1, maxSteps, harness.Snapshot.Completed)
				Expect(err).NotTo(HaveOccurred())
				Expect(steps[len(steps)-1].Hashes()).To(Equal([]string{held.UpdateHash()}))
				sw.expectNoSurge()
				expectNothingLeft(ns, "canary", 2)
			})
		})
	}
})

var _ = Describe("pause under write faults", func() {
	It("freezes a rollout mid-way and continues on resume", func() {
		withFaults(func() {
			ns := newNamespace()
			deploy(harness.NewDGD(ns, "pause").Disagg(8, 4, "vllm:v1").Rollout("1", "0").Obj())
			sw := watchSurge(ns, "pause")
			update(ns, "pause", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
			steps, err := drive(ns, "pause", -1, maxSteps, func(s harness.Snapshot) bool { return s.PoolSize(s.UpdateHash()) >= 3 })
			Expect(err).NotTo(HaveOccurred())
			before := steps[len(steps)-1]
			update(ns, "pause", func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Paused = true })
			held, err := drive(ns, "pause", -1, maxSteps, harness.PhaseIs(v1alpha1.RolloutPaused, "Paused"))
			Expect(err).NotTo(HaveOccurred())
			frozen := held[len(held)-1]
			Expect(frozen.Replicas()).To(Equal(before.Replicas()))
			By("readiness arrives while paused: nothing is scaled")
			_, err = env.PlayDeployments(ctx, ns, "pause", -1)
			Expect(err).NotTo(HaveOccurred())
			again, err := waitSettled(ns, "pause")
			Expect(err).NotTo(HaveOccurred())
			Expect(again.Replicas()).To(Equal(frozen.Replicas()))
			Expect(again.DGD.Status.RollingUpdate.Phase).To(Equal(v1alpha1.RolloutPaused))
			By("resume")
			update(ns, "pause", func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Paused = false })
			_, err = drive(ns, "pause", -1, maxSteps, harness.CompletedAt(2))
			Expect(err).NotTo(HaveOccurred())
			sw.expectNoSurge()
			expectNothingLeft(ns, "pause", 2)
		})
	})
})

var _ = Describe("Recreate under write faults", func() {
	It("never runs both revisions at once", func() {
		withFaults(func() {
			ns := newNamespace()
			old := deploy(harness.NewDGD(ns, "recreate").Disagg(4, 2, "vllm:v1").Strategy(v1alpha1.RecreateStrategy).Obj()).Hashes()[0]
			update(ns, "recreate", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
			steps, err := drive(ns, "recreate", -1, maxSteps, harness.CompletedAt(2))
			Expect(err).NotTo(HaveOccurred())
			for _, st := range steps {
				Expect(st.PoolSize(old) == 0 || st.PoolSize(st.UpdateHash()) == 0).To(BeTrue(), "both revisions ran at once: %v", st.Replicas())
			}
			expectNothingLeft(ns, "recreate", 2)
		})
	})
})

var _ = Describe("retarget under write faults", func() {
	It("drains the intermediate revision B before the original A when C arrives mid-rollout", func() {
		withFaults(func() {
			ns := newNamespace()
			a := deploy(harness.NewDGD(ns, "abc").Disagg(8, 4, "vllm:a").Rollout("1", "0").Obj()).Hashes()[0]
			sw := watchSurge(ns, "abc")
			update(ns, "abc", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:b") })
			steps, err := drive(ns, "abc", -1, maxSteps, func(s harness.Snapshot) bool { return s.PoolSize(s.UpdateHash()) >= 3 })
			Expect(err).NotTo(HaveOccurred())
			b := steps[len(steps)-1].UpdateHash()
			update(ns, "abc", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:c") })
			steps, err = drive(ns, "abc", -1, maxSteps, harness.CompletedAt(3))
			Expect(err).NotTo(HaveOccurred())
			sw.expectNoSurge()
			c := steps[len(steps)-1].UpdateHash()
			Expect(c).NotTo(BeElementOf(a, b))
			for i := 1; i < len(steps); i++ {
				Expect(steps[i].PoolSize(b)).To(BeNumerically("<=", steps[i-1].PoolSize(b)), "B grew at step %d", i)
				if steps[i].PoolSize(a) < steps[i-1].PoolSize(a) {
					Expect(steps[i].PoolSize(b)).To(BeZero(), "A shrank at step %d while B still had replicas: %v", i, steps[i].Replicas())
				}
			}
			Eventually(func() int { return len(deploymentsInNamespace(ns)) }).Should(Equal(3))
			expectNothingLeft(ns, "abc", 3)
		})
	})
})

var _ = Describe("rollback under write faults", func() {
	It("rolls back to revision 1: renumbered 3, a normal rollout follows", func() {
		withFaults(func() {
			ns := newNamespace()
			v1 := deploy(harness.NewDGD(ns, "undo").Disagg(4, 2, "vllm:v1").Obj()).Hashes()[0]
			update(ns, "undo", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
			_, err := drive(ns, "undo", -1, maxSteps, harness.CompletedAt(2))
			Expect(err).NotTo(HaveOccurred())

			var one *appsv1.ControllerRevision
			for _, r := range controllerRevisions(ns) {
				if r.Revision == 1 {
					one = r.DeepCopy()
				}
			}
			Expect(one).NotTo(BeNil())
			sw := watchSurge(ns, "undo")
			update(ns, "undo", func(d *v1alpha1.DynamoGraphDeployment) {
				spec, err := revisions.Restore(d, one)
				Expect(err).NotTo(HaveOccurred())
				d.Spec = *spec
			})
			steps, err := drive(ns, "undo", -1, maxSteps, harness.CompletedAt(3))
			Expect(err).NotTo(HaveOccurred())
			sw.expectNoSurge()
			Expect(steps[len(steps)-1].Hashes()).To(Equal([]string{v1}))
			Eventually(func() map[string]int64 {
				out := map[string]int64{}
				for _, r := range controllerRevisions(ns) {
					out[revisions.HashOf(&r)] = r.Revision
				}
				return out
			}).Should(HaveKeyWithValue(v1, int64(3)))
			Expect(controllerRevisions(ns)).To(HaveLen(2))
			expectNothingLeft(ns, "undo", 2)
		})
	})
})

func ptrIntStr(s string) *intstr.IntOrString {
	v := intstr.Parse(s)
	return &v
}
