package deployment_test

import (
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/harness"
)

var _ = Describe("first deploy", func() {
	It("creates the frontend and one Deployment per worker service at full size, revision 1", func() {
		ns := newNamespace()
		s := deploy(harness.NewDGD(ns, "first").Disagg(4, 2, "vllm:v1").Obj())
		Expect(s.Replicas()).To(HaveLen(2))
		Expect(s.DGD.Status.UpdateRevisionNumber).To(Equal(int64(1)))
		Expect(s.DGD.Status.CurrentRevision).To(Equal(s.DGD.Status.UpdateRevision))
		Expect(s.Stable).To(HaveLen(1))
		Expect(s.Stable[0].Name).To(Equal("first-frontend"))
		for _, c := range []string{v1alpha1.ConditionAvailable, v1alpha1.ConditionProgressing, v1alpha1.ConditionReady} {
			Expect(meta.IsStatusConditionTrue(s.DGD.Status.Conditions, c)).To(BeTrue(), c)
		}
		Expect(s.DGD.Status.Ready).To(Equal("7/7"))
		By("owner references let the garbage collector delete everything with the DGD")
		for _, d := range s.All {
			Expect(metav1IsControlledBy(&d, &s.DGD)).To(BeTrue(), d.Name)
		}
		By("env vars isolate the worker revision and let the frontend discover by prefix")
		h := s.Hashes()[0]
		for _, d := range s.All {
			env := map[string]string{}
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
			Expect(env[v1alpha1.EnvDynNamespace]).To(Equal(ns + "-first"))
			if d.Labels[v1alpha1.LabelWorkerHash] != "" {
				Expect(env[v1alpha1.EnvDynNamespaceWorkerSuffix]).To(Equal(h))
				Expect(d.Name).To(HaveSuffix("-" + h))
			} else {
				Expect(env[v1alpha1.EnvDynNamespacePrefix]).To(Equal(ns + "-first"))
			}
		}
	})
})

var _ = Describe("image change", func() {
	for _, tc := range []struct {
		name         string
		build        func(ns string) *v1alpha1.DynamoGraphDeployment
		grow         int32
		wantMinSteps int
	}{
		{"aggregated worker R=4, defaults, all ready at once", func(ns string) *v1alpha1.DynamoGraphDeployment {
			return harness.NewDGD(ns, "agg").Service("worker", "worker", "", 4, "vllm:v1").Obj()
		}, -1, 2},
		{"disaggregated P=4/D=2, defaults, one replica ready per step", func(ns string) *v1alpha1.DynamoGraphDeployment {
			return harness.NewDGD(ns, "disagg").Disagg(4, 2, "vllm:v1").Obj()
		}, 1, 3},
		{"disaggregated P=8/D=4, maxSurge 1, maxUnavailable 0", func(ns string) *v1alpha1.DynamoGraphDeployment {
			return harness.NewDGD(ns, "disagg-s1").Disagg(8, 4, "vllm:v1").Rollout("1", "0").Obj()
		}, -1, 8},
	} {
		It("rolls "+tc.name+" to completion with every invariant at every step", func() {
			ns := newNamespace()
			obj := tc.build(ns)
			first := deploy(obj)
			oldHash, oldRevision := first.Hashes()[0], first.DGD.Status.UpdateRevision
			update(ns, obj.Name, func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
			steps, err := env.Drive(ctx, ns, obj.Name, tc.grow, 60, func(s harness.Snapshot) bool {
				return s.Completed() && s.DGD.Status.UpdateRevisionNumber == 2
			})
			Expect(err).NotTo(HaveOccurred())
			Expect(len(steps)).To(BeNumerically(">=", tc.wantMinSteps), "a rollout in one step would be a Recreate")
			last := steps[len(steps)-1]
			Expect(last.Hashes()).To(HaveLen(1))
			Expect(last.Hashes()[0]).NotTo(Equal(oldHash))
			for _, w := range last.Workloads {
				Expect(w.Spec).To(Equal(*last.DGD.Spec.Services[w.Service].Replicas))
			}
			By("status.currentRevision names the old revision until the rollout completes (StatefulSet convention)")
			midway := 0
			for _, st := range steps {
				if st.PoolSize(oldHash) > 0 && st.PoolSize(st.UpdateHash()) > 0 {
					midway++
					Expect(st.DGD.Status.CurrentRevision).To(Equal(oldRevision), "mid-rollout")
				}
			}
			Expect(midway).To(BeNumerically(">", 0))
			Expect(last.DGD.Status.CurrentRevision).To(Equal(last.DGD.Status.UpdateRevision))
			By("both pools existed side by side during the rollout")
			Expect(slices.ContainsFunc(steps, func(s harness.Snapshot) bool { return len(s.Hashes()) == 2 })).To(BeTrue())
			By("the drained revision's Deployments are deleted")
			Eventually(func() []string { s, _ := env.Take(ctx, ns, obj.Name); return s.Hashes() }).Should(HaveLen(1))
			Expect(last.DGD.Status.RollingUpdate.EndTime).NotTo(BeNil())
			Expect(last.DGD.Status.RollingUpdate.UpdatedServices).To(ConsistOf(last.DGD.WorkerServiceNames()))
		})
	}
})

var _ = Describe("changes that start no worker rollout", func() {
	It("updates the frontend in place on a frontend-only change, a revision that shares the workers' hash", func() {
		ns := newNamespace()
		first := deploy(harness.NewDGD(ns, "fe").Disagg(2, 1, "vllm:v1").Obj())
		update(ns, "fe", func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = "frontend:v2"
		})
		Eventually(func() string {
			var d appsv1.Deployment
			_ = env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fe-frontend"}, &d)
			return d.Spec.Template.Spec.Containers[0].Image
		}).Should(Equal("frontend:v2"))
		s, err := env.WaitSettled(ctx, ns, "fe")
		Expect(err).NotTo(HaveOccurred())
		Expect(s.DGD.Status.UpdateRevisionNumber).To(Equal(int64(2)), "the whole graph is a revision")
		Expect(s.DGD.Status.UpdateWorkerHash).To(Equal(first.UpdateHash()))
		Expect(s.Hashes()).To(Equal(first.Hashes()), "no worker workload of another hash")
		Expect(s.Replicas()).To(Equal(first.Replicas()))
		var revs appsv1.ControllerRevisionList
		Expect(env.Client.List(ctx, &revs, client.InNamespace(ns))).To(Succeed())
		Expect(revs.Items).To(HaveLen(2))
		for _, r := range revs.Items {
			Expect(r.Labels[v1alpha1.LabelWorkerHash]).To(Equal(first.UpdateHash()))
		}
	})

	It("removes from the frontend's Deployment what its template no longer has (the cache holds no pod spec)", func() {
		ns := newNamespace()
		frontend := func() appsv1.Deployment {
			var d appsv1.Deployment
			Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sel-frontend"}, &d)).To(Succeed())
			return d
		}
		obj := harness.NewDGD(ns, "sel").Disagg(1, 1, "vllm:v1").Obj()
		fe := obj.Spec.Services["Frontend"]
		if fe.ExtraPodSpec.PodSpec == nil {
			fe.ExtraPodSpec.PodSpec = &corev1.PodSpec{}
		}
		fe.ExtraPodSpec.NodeSelector = map[string]string{"pool": "cpu", "zone": "a"}
		deploy(obj)
		Expect(frontend().Spec.Template.Spec.NodeSelector).To(Equal(map[string]string{"pool": "cpu", "zone": "a"}))
		// A map key removed from the template: a merge patch computed against a copy
		// without the pod spec would leave it on the Deployment.
		update(ns, "sel", func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["Frontend"].ExtraPodSpec.NodeSelector = map[string]string{"pool": "cpu"}
		})
		Eventually(func() map[string]string { return frontend().Spec.Template.Spec.NodeSelector }).
			Should(Equal(map[string]string{"pool": "cpu"}))
		_, err := env.WaitSettled(ctx, ns, "sel")
		Expect(err).NotTo(HaveOccurred())
		Expect(frontend().Spec.Template.Spec.Containers).To(HaveLen(1), "the rest of the pod spec is there")
	})

	It("scales the current revision on a replicas-only change", func() {
		ns := newNamespace()
		first := deploy(harness.NewDGD(ns, "scale").Disagg(2, 1, "vllm:v1").Obj())
		update(ns, "scale", func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["prefill"].Replicas = ptr.To[int32](6)
			d.Spec.Services["decode"].Replicas = ptr.To[int32](3)
		})
		steps, err := env.Drive(ctx, ns, "scale", -1, 10, func(s harness.Snapshot) bool {
			return s.Completed() && s.DGD.Status.ReadyReplicas == 9
		})
		Expect(err).NotTo(HaveOccurred())
		last := steps[len(steps)-1]
		Expect(last.Hashes()).To(Equal(first.Hashes()))
		Expect(last.DGD.Status.UpdateRevisionNumber).To(Equal(int64(1)))
	})
})

func metav1IsControlledBy(obj client.Object, owner client.Object) bool {
	ref := metav1GetControllerOf(obj)
	return ref != nil && ref.UID == owner.GetUID() && ptr.Deref(ref.BlockOwnerDeletion, false)
}
