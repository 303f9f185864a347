package deployment_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/revisions"
	"github.com/dgd-rollout/operator/test/harness"
)

var _ = Describe("partition", func() {
	for _, p := range []string{"50%", "2"} {
		It("holds P=4/D=2 at partition "+p+" (2 prefill + 1 decode old), then completes at 0", func() {
			ns := newNamespace()
			obj := harness.NewDGD(ns, "canary").Disagg(4, 2, "vllm:v1").Partition(p).Obj()
			old := deploy(obj).Hashes()[0]
			update(ns, "canary", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
			steps, err := env.Drive(ctx, ns, "canary", -1, 20, harness.PhaseIs(v1alpha1.RolloutPaused, "Partitioned"))
			Expect(err).NotTo(HaveOccurred())
			held := steps[len(steps)-1]
			Expect(held.Pool(old)).To(Equal(map[string]int32{"prefill": 2, "decode": 1}))
			Expect(held.Pool(held.UpdateHash())).To(Equal(map[string]int32{"prefill": 2, "decode": 1}))

			By("the hold is stable: more readiness changes nothing")
			_, err = env.PlayDeployments(ctx, ns, "canary", -1)
			Expect(err).NotTo(HaveOccurred())
			again, err := env.WaitSettled(ctx, ns, "canary")
			Expect(err).NotTo(HaveOccurred())
			Expect(again.Replicas()).To(Equal(held.Replicas()))

			By("promoting: partition 0 completes the rollout")
			update(ns, "canary", func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Partition = ptrIntStr("0") })
			steps, err = env.Drive(ctx, ns, "canary", -1, 20, harness.Snapshot.Completed)
			Expect(err).NotTo(HaveOccurred())
			Expect(steps[len(steps)-1].Hashes()).To(Equal([]string{held.UpdateHash()}))
		})
	}
})

var _ = Describe("pause", func() {
	It("freezes a rollout mid-way and continues on resume", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "pause").Disagg(8, 4, "vllm:v1").Rollout("1", "0").Obj()
		deploy(obj)
		update(ns, "pause", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
		steps, err := env.Drive(ctx, ns, "pause", -1, 3, func(s harness.Snapshot) bool { return len(s.Hashes()) == 2 })
		Expect(err).NotTo(HaveOccurred())
		before := steps[len(steps)-1]
		update(ns, "pause", func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Paused = true })
		held, err := env.WaitSettled(ctx, ns, "pause")
		Expect(err).NotTo(HaveOccurred())
		Expect(held.DGD.Status.RollingUpdate.Phase).To(Equal(v1alpha1.RolloutPaused))
		By("readiness arrives while paused: nothing is scaled")
		_, err = env.PlayDeployments(ctx, ns, "pause", -1)
		Expect(err).NotTo(HaveOccurred())
		held, err = env.WaitSettled(ctx, ns, "pause")
		Expect(err).NotTo(HaveOccurred())
		Expect(held.Replicas()).To(Equal(before.Replicas()))
		Expect(held.DGD.Status.RollingUpdate.Phase).To(Equal(v1alpha1.RolloutPaused))
		By("resume")
		update(ns, "pause", func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Paused = false })
		_, err = env.Drive(ctx, ns, "pause", -1, 30, harness.Snapshot.Completed)
		Expect(err).NotTo(HaveOccurred())
	})
})

var _ = Describe("Recreate", func() {
	It("scales the old revision to zero and starts the new one only when its pods are gone", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "recreate").Disagg(4, 2, "vllm:v1").Strategy(v1alpha1.RecreateStrategy).Obj()
		old := deploy(obj).Hashes()[0]
		update(ns, "recreate", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
		s, err := env.WaitSettled(ctx, ns, "recreate")
		Expect(err).NotTo(HaveOccurred())
		Expect(s.PoolSize(old)).To(BeZero())
		Expect(s.PoolSize(s.UpdateHash())).To(BeZero(), "new workers must wait for the old pods to be gone")
		steps, err := env.Drive(ctx, ns, "recreate", -1, 10, harness.Snapshot.Completed)
		Expect(err).NotTo(HaveOccurred())
		for _, st := range steps {
			Expect(st.PoolSize(old) == 0 || st.PoolSize(st.UpdateHash()) == 0).To(BeTrue(), "both revisions ran at once: %v", st.Replicas())
		}
	})
})

var _ = Describe("retarget", func() {
	It("drains the intermediate revision B before the original A when C arrives mid-rollout", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "abc").Disagg(8, 4, "vllm:a").Rollout("1", "0").Obj()
		a := deploy(obj).Hashes()[0]
		update(ns, "abc", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:b") })
		steps, err := env.Drive(ctx, ns, "abc", -1, 20, func(s harness.Snapshot) bool { return s.PoolSize(s.UpdateHash()) >= 3 })
		Expect(err).NotTo(HaveOccurred())
		b := steps[len(steps)-1].UpdateHash()
		update(ns, "abc", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:c") })
		steps, err = env.Drive(ctx, ns, "abc", -1, 60, harness.Snapshot.Completed)
		Expect(err).NotTo(HaveOccurred())
		c := steps[len(steps)-1].UpdateHash()
		Expect(c).NotTo(BeElementOf(a, b))
		Expect(steps[len(steps)-1].DGD.Status.UpdateRevisionNumber).To(Equal(int64(3)))
		for i := 1; i < len(steps); i++ {
			Expect(steps[i].PoolSize(b)).To(BeNumerically("<=", steps[i-1].PoolSize(b)), "B grew at step %d", i)
			if steps[i].PoolSize(a) < steps[i-1].PoolSize(a) {
				Expect(steps[i].PoolSize(b)).To(BeZero(), "A shrank at step %d while B still had replicas: %v", i, steps[i].Replicas())
			}
		}
	})
})

var _ = Describe("rollback and history", func() {
	It("rolls back to revision 1: the revision is renumbered 3 and a normal rollout follows", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "undo").Disagg(4, 2, "vllm:v1").Obj()
		v1 := deploy(obj).Hashes()[0]
		update(ns, "undo", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
		_, err := env.Drive(ctx, ns, "undo", -1, 20, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())

		By("restoring revision 1's worker templates into the spec, as kubectl dgd rollout undo does")
		var one *appsv1.ControllerRevision
		for _, r := range controllerRevisions(ns) {
			if r.Revision == 1 {
				one = r.DeepCopy()
			}
		}
		Expect(one).NotTo(BeNil())
		update(ns, "undo", func(d *v1alpha1.DynamoGraphDeployment) {
			spec, err := revisions.Restore(d, one)
			Expect(err).NotTo(HaveOccurred())
			d.Spec = *spec
		})
		steps, err := env.Drive(ctx, ns, "undo", -1, 20, harness.CompletedAt(3))
		Expect(err).NotTo(HaveOccurred())
		Expect(steps[len(steps)-1].Hashes()).To(Equal([]string{v1}))
		revs := controllerRevisions(ns)
		Expect(revs).To(HaveLen(2))
		for _, r := range revs {
			if r.Labels[v1alpha1.LabelWorkerHash] == v1 {
				Expect(r.Revision).To(Equal(int64(3)))
			}
		}
	})

	It("truncates history to revisionHistoryLimit, never deleting a revision that has workers", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "hist").Disagg(2, 1, "vllm:v1").HistoryLimit(1).Obj()
		deploy(obj)
		for i, img := range []string{"vllm:v2", "vllm:v3", "vllm:v4"} {
			update(ns, "hist", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, img) })
			_, err := env.Drive(ctx, ns, "hist", -1, 20, func(s harness.Snapshot) bool {
				return s.Completed() && s.DGD.Status.UpdateRevisionNumber == int64(i+2)
			})
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(func() []int64 {
			var nums []int64
			for _, r := range controllerRevisions(ns) {
				nums = append(nums, r.Revision)
			}
			return nums
		}).Should(ConsistOf(int64(3), int64(4)))
	})
})

func ptrIntStr(s string) *intstr.IntOrString {
	v := intstr.Parse(s)
	return &v
}

func controllerRevisions(ns string) []appsv1.ControllerRevision {
	var revs appsv1.ControllerRevisionList
	Expect(env.Client.List(ctx, &revs, client.InNamespace(ns))).To(Succeed())
	return revs.Items
}

var _ = Describe("deletion", func() {
	It("leaves every workload and revision controlled by the DGD, so the garbage collector removes them", func() {
		ns := newNamespace()
		s := deploy(harness.NewDGD(ns, "gone").Disagg(2, 1, "vllm:v1").Obj())
		objs := []client.Object{}
		for i := range s.All {
			objs = append(objs, &s.All[i])
		}
		for _, r := range controllerRevisions(ns) {
			objs = append(objs, r.DeepCopy())
		}
		Expect(objs).To(HaveLen(4))
		for _, o := range objs {
			Expect(metav1IsControlledBy(o, &s.DGD)).To(BeTrue(), o.GetName())
		}
		Expect(env.Client.Delete(ctx, &s.DGD)).To(Succeed())
	})
})
