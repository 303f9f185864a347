package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/harness"
)

var _ = Describe("capacity problems", func() {
	It("says which service's pods of which revision the scheduler cannot place, and why, in the status and an Event", func() {
		s := start(gpus(harness.NewDGD(newNamespace(), "nogpu").Service("worker", "worker", "", 2, "vllm:v1").Obj()))
		By("a revision whose worker asks for more GPUs than any node has")
		s.update(func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["worker"].Resources.Limits.GPU = "16"
		})
		want := `^1 worker pod of revision 2 unschedulable: 0/4 nodes are available: 4 Insufficient nvidia\.com/gpu$`
		s.until("the unschedulable pod is reported", func(d *v1alpha1.DynamoGraphDeployment, _ []corev1.Pod) bool {
			return d.Status.UpdateRevisionNumber == 2 && d.Status.Services["worker"].Message != ""
		})
		d := s.dgd()
		Expect(d.Status.Services["worker"].Message).To(MatchRegexp(want))
		ready := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionReady)
		Expect(ready.Status).To(BeEquivalentTo("False"))
		Expect(ready.Message).To(ContainSubstring("Insufficient nvidia.com/gpu"))
		Expect(meta.IsStatusConditionTrue(d.Status.Conditions, v1alpha1.ConditionReconciling)).To(BeTrue())
		Eventually(func(g Gomega) {
			var list eventsv1.EventList
			g.Expect(k8s.List(ctx, &list, client.InNamespace(s.ns))).To(Succeed())
			var notes []string
			for _, e := range list.Items {
				if e.Reason == v1alpha1.EventPodsUnschedulable && e.Regarding.Name == s.name {
					g.Expect(e.Type).To(Equal("Warning"))
					notes = append(notes, e.Note)
				}
			}
			g.Expect(notes).To(ConsistOf(MatchRegexp(want)), "one Event, not one per pass")
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

		By("back to a size that fits: rolled out, the message gone")
		s.update(func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["worker"].Resources.Limits.GPU = "1"
		})
		s.waitRolledOut(3)
		Expect(s.dgd().Status.Services["worker"].Message).To(BeEmpty())
	})
})
