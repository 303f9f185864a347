package deployment_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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
			halted(ns, "taken", v1alpha1.ReasonNameConflict, true, "Service "+ns+"/taken-frontend exists")
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

// Issue 23, item 3: two DGDs whose names collide ("llm" with a frontend "prefill-fe",
// "llm-prefill" with a frontend "fe": both need a Deployment and a Service named
// llm-prefill-fe). The second is stopped before any write, says which object belongs
// to whom, and neither DGD's running pods are touched; renaming the service recovers.
var _ = Describe("two DGDs whose names collide", func() {
	It("stops the second before any write (NameConflict naming the first DGD's objects), touches neither, and a rename recovers", func() {
		ns := newNamespace()
		graph := func(name, frontend string) *v1alpha1.DynamoGraphDeployment {
			d := harness.NewDGD(ns, name).Disagg(1, 1, "vllm:v1").Obj()
			delete(d.Spec.Services, "Frontend")
			harness.AddService(d, frontend, v1alpha1.ComponentTypeFrontend, 1, harness.FrontendImage)
			return d
		}
		deploy(graph("llm", "prefill-fe"))
		first := func() map[string]string {
			out := map[string]string{}
			ds, err := env.Deployments(ctx, ns, "llm")
			Expect(err).NotTo(HaveOccurred())
			for _, d := range ds {
				out["Deployment/"+d.Name] = fmt.Sprintf("%s replicas %d generation %d", d.UID, *d.Spec.Replicas, d.Generation)
			}
			var svcs corev1.ServiceList
			Expect(env.Client.List(ctx, &svcs, client.InNamespace(ns))).To(Succeed())
			for _, s := range svcs.Items {
				out["Service/"+s.Name] = fmt.Sprintf("%s %s", s.UID, s.ResourceVersion)
			}
			return out
		}
		before := first()
		Expect(before).To(HaveKey("Deployment/llm-prefill-fe"))

		Expect(env.Client.Create(ctx, graph("llm-prefill", "fe"))).To(Succeed())
		halted(ns, "llm-prefill", v1alpha1.ReasonNameConflict, true,
			"Deployment "+ns+"/llm-prefill-fe exists and is controlled by DynamoGraphDeployment llm, not by DynamoGraphDeployment llm-prefill",
			"Service "+ns+"/llm-prefill-fe exists and is controlled by DynamoGraphDeployment llm")
		By("the second DGD wrote nothing: no workload, no revision; the first is untouched")
		mine, err := env.Deployments(ctx, ns, "llm-prefill")
		Expect(err).NotTo(HaveOccurred())
		Expect(mine).To(BeEmpty())
		var revs appsv1.ControllerRevisionList
		Expect(env.Client.List(ctx, &revs, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelGraph: "llm-prefill"})).To(Succeed())
		Expect(revs.Items).To(BeEmpty())
		Expect(first()).To(Equal(before))

		By("renamed, the second DGD deploys beside the first")
		update(ns, "llm-prefill", func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["gw"] = d.Spec.Services["fe"]
			delete(d.Spec.Services, "fe")
		})
		_, err = env.Drive(ctx, ns, "llm-prefill", -1, 20, harness.Snapshot.Completed)
		Expect(err).NotTo(HaveOccurred())
		Expect(first()).To(HaveKeyWithValue("Deployment/llm-prefill-fe", before["Deployment/llm-prefill-fe"]))
	})
})
