package deployment_test

import (
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/test/harness"
)

// setRestart sets Dynamo's spec.restart to raw JSON, as kubectl dgd restart does.
func setRestart(raw string) func(*v1alpha1.DynamoGraphDeployment) {
	return func(d *v1alpha1.DynamoGraphDeployment) {
		d.Spec.Restart = &v1alpha1.Raw{}
		d.Spec.Restart.Raw = []byte(raw)
	}
}

// restartReasons lists the reasons of the Restart* Events about the DGD name.
func restartReasons(g Gomega, ns, name string) []string {
	var list eventsv1.EventList
	g.Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name && slices.Contains([]string{v1alpha1.EventRestartStarted, v1alpha1.EventRestartCompleted,
			v1alpha1.EventRestartSuperseded, v1alpha1.EventRestartFailed}, e.Reason) {
			out = append(out, e.Reason)
		}
	}
	slices.Sort(out)
	return out
}

var _ = Describe("restart (Dynamo's spec.restart)", func() {
	It("rolls every worker service to new Deployments of a new revision and the frontend in place, reports Restarting then Completed with Events; the same id again restarts nothing", func() {
		ns := newNamespace()
		first := deploy(harness.NewDGD(ns, "rst").Disagg(2, 2, "vllm:v1").Rollout("1", "0").Obj())
		oldHash := first.Hashes()[0]
		Expect(first.DGD.Status.Restart).To(BeNil(), "a DGD never restarted has no status.restart")

		update(ns, "rst", setRestart(`{"id":"r1"}`))
		steps, err := env.Drive(ctx, ns, "rst", 1, 40, func(s harness.Snapshot) bool {
			r := s.DGD.Status.Restart
			return harness.CompletedAt(2)(s) && r != nil && r.Phase == v1alpha1.RestartPhaseCompleted
		})
		Expect(err).NotTo(HaveOccurred())
		By("Restarting, with the services still rolling, while the rollout it started ran")
		Expect(slices.ContainsFunc(steps, func(s harness.Snapshot) bool {
			r := s.DGD.Status.Restart
			return r != nil && r.Phase == v1alpha1.RestartPhaseRestarting && r.ObservedID == "r1" && len(r.InProgress) > 0 && len(s.Hashes()) == 2
		})).To(BeTrue(), "no settled state showed the restart in progress beside the old workers")
		last := steps[len(steps)-1]
		Expect(last.DGD.Status.Restart.ObservedID).To(Equal("r1"))
		Expect(last.DGD.Status.Restart.InProgress).To(BeEmpty())
		Expect(last.Hashes()).To(HaveLen(1))
		newHash := last.Hashes()[0]
		Expect(newHash).NotTo(Equal(oldHash), "a restart is a new worker revision")

		By("each worker service runs a new Deployment carrying the id; the frontend's own Deployment has it too")
		for _, svc := range []string{"prefill", "decode", "Frontend"} {
			hash := newHash
			if svc == "Frontend" {
				hash = ""
			}
			var d appsv1.Deployment
			Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: backends.WorkloadName("rst", svc, hash)}, &d)).To(Succeed(), svc)
			Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationRestartAt, "r1"), svc)
		}
		Eventually(func() []string { s, _ := env.Take(ctx, ns, "rst"); return s.Hashes() }).Should(Equal([]string{newHash}), "the old workers are deleted")

		By("the history says why revision 2 was made")
		var revs appsv1.ControllerRevisionList
		Expect(env.Client.List(ctx, &revs, client.InNamespace(ns))).To(Succeed())
		causes := map[int64]string{}
		for _, r := range revs.Items {
			causes[r.Revision] = r.Annotations[v1alpha1.AnnotationChangeCause]
		}
		Expect(causes).To(HaveKeyWithValue(int64(2), "restart r1"))

		By("a RestartStarted and a RestartCompleted Event")
		Eventually(func(g Gomega) []string { return restartReasons(g, ns, "rst") }).Should(Equal([]string{v1alpha1.EventRestartCompleted, v1alpha1.EventRestartStarted}))

		By("the same id again (with another strategy: a new generation) makes no revision and restarts nothing")
		update(ns, "rst", setRestart(`{"id":"r1","strategy":{"type":"Parallel"}}`))
		var again harness.Snapshot
		Eventually(func(g Gomega) {
			s, err := env.WaitSettled(ctx, ns, "rst")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.DGD.Status.ObservedGeneration).To(Equal(s.DGD.Generation))
			g.Expect(s.DGD.Generation).To(BeNumerically(">", last.DGD.Generation))
			again = s
		}).Should(Succeed())
		Expect(again.DGD.Status.UpdateRevisionNumber).To(Equal(int64(2)))
		Expect(again.DGD.Status.Restart.ObservedID).To(Equal("r1"))
		Expect(again.DGD.Status.Restart.Phase).To(Equal(v1alpha1.RestartPhaseCompleted))
		Expect(again.Hashes()).To(Equal([]string{newHash}))
		Expect(again.Replicas()).To(Equal(last.Replicas()))
		Expect(env.Client.List(ctx, &revs, client.InNamespace(ns))).To(Succeed())
		Expect(revs.Items).To(HaveLen(2))
		Expect(restartReasons(Default, ns, "rst")).To(HaveLen(2), "no other Restart Event")
	})
})
