package deployment_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/harness"
)

// Issue 22: a Service the operator needs but does not own was taken as created when
// its create answered AlreadyExists (LWS's headless Service under the discovery
// Service's name). Now it is reported and left alone.
var _ = Describe("a name someone else holds", func() {
	for _, tc := range []struct {
		what   string
		labels map[string]string
	}{
		// Not labelled as ours: not in the operator's cache, so its create answers
		// AlreadyExists (the path of LWS's headless Service).
		{"a Service the cache does not show (its create answers AlreadyExists)", nil},
		// Labelled as ours but controlled by nothing of the DGD's: found in the cache.
		{"a Service the cache shows, controlled by another object", map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}},
	} {
		It("is reported on the DGD (Ready False, Stalled, reason NameConflict, a Warning Event naming it) and left alone: "+tc.what, func() {
			ns := newNamespace()
			theirs := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken-frontend", Labels: tc.labels},
				Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "someone-else"}, Ports: []corev1.ServicePort{{Name: "web", Port: 80}}},
			}
			Expect(env.Client.Create(ctx, theirs)).To(Succeed())
			owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someone-else"}}
			Expect(env.Client.Create(ctx, owner)).To(Succeed())
			if tc.labels != nil {
				theirs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: new(bool)}}
				*theirs.OwnerReferences[0].Controller = true
				Expect(env.Client.Update(ctx, theirs)).To(Succeed())
			}
			before := theirs.DeepCopy()
			Expect(env.Client.Create(ctx, harness.NewDGD(ns, "taken").Disagg(1, 1, "vllm:v1").Obj())).To(Succeed())
			Eventually(func(g Gomega) {
				d := getDGD(ns, "taken")
				c := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionReady)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal(v1alpha1.ReasonNameConflict))
				g.Expect(c.Message).To(ContainSubstring("Service " + ns + "/taken-frontend exists"))
				g.Expect(meta.IsStatusConditionTrue(d.Status.Conditions, v1alpha1.ConditionStalled)).To(BeTrue())
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				var list eventsv1.EventList
				g.Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
				var found bool
				for _, e := range list.Items {
					found = found || e.Reason == v1alpha1.EventNameConflict && e.Type == corev1.EventTypeWarning
				}
				g.Expect(found).To(BeTrue(), "a Warning Event NameConflict")
			}).Should(Succeed())
			By("the Service is not adopted, changed or deleted")
			var now corev1.Service
			Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(theirs), &now)).To(Succeed())
			Expect(now.OwnerReferences).To(Equal(before.OwnerReferences))
			Expect(now.Spec.Selector).To(Equal(before.Spec.Selector))
			Expect(now.Spec.Ports[0].Port).To(Equal(int32(80)))
			By("once it is gone the DGD makes its own and goes on")
			Expect(env.Client.Delete(ctx, &now)).To(Succeed())
			touch(ns, "taken") // the 30 s recheck, without waiting for it
			_, err := env.Drive(ctx, ns, "taken", -1, 20, func(s harness.Snapshot) bool {
				return meta.IsStatusConditionTrue(s.DGD.Status.Conditions, v1alpha1.ConditionReady)
			})
			Expect(err).NotTo(HaveOccurred())
			var ours corev1.Service
			Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(theirs), &ours)).To(Succeed())
			Expect(metav1.GetControllerOf(&ours).Kind).To(Equal("DynamoGraphDeployment"))
		})
	}
})

// touch changes a DGD's annotations, which starts a pass.
func touch(ns, name string) {
	update(ns, name, func(d *v1alpha1.DynamoGraphDeployment) {
		metav1.SetMetaDataAnnotation(&d.ObjectMeta, "test/touched", "yes")
	})
}
