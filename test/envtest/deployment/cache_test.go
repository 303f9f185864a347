package deployment_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/test/harness"
)

// Issue 23: the operator caches only the Deployments labelled as its own
// (app.CacheOptions). One of its Deployments stripped of its labels leaves the cache,
// and a Deployment of another owner under a name the DGD needs is never in it.
var _ = Describe("the filtered cache", func() {
	It("puts the labels back on a worker Deployment stripped of them, same object, counted once", func() {
		ns := newNamespace()
		s := deploy(harness.NewDGD(ns, "relabel").Disagg(2, 1, "vllm:v1").Obj())
		name := backends.WorkloadName("relabel", "prefill", s.Hashes()[0])
		var victim appsv1.Deployment
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &victim)).To(Succeed())
		want := victim.Labels
		victim.Labels = nil
		Expect(env.Client.Update(ctx, &victim)).To(Succeed())

		Eventually(func(g Gomega) {
			var now appsv1.Deployment
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&victim), &now)).To(Succeed())
			g.Expect(now.UID).To(Equal(victim.UID))
			g.Expect(now.Labels).To(Equal(want))
		}).Should(Succeed())
		var list appsv1.DeploymentList
		Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		Expect(list.Items).To(HaveLen(3), "frontend, prefill and decode: none made twice")
		Eventually(func(g Gomega) {
			d := getDGD(ns, "relabel")
			g.Expect(d.Status.Services["prefill"].Replicas).To(Equal(int32(2)))
			g.Expect(meta.IsStatusConditionTrue(d.Status.Conditions, v1alpha1.ConditionReady)).To(BeTrue())
		}).Should(Succeed())
	})

	It("reports a Deployment another owner holds under a name the DGD needs (not in the cache) and leaves it alone", func() {
		ns := newNamespace()
		pod := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "someone-else"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
		theirs := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: backends.WorkloadName("held", "frontend", "")},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: pod.Labels}, Template: pod}}
		Expect(env.Client.Create(ctx, theirs)).To(Succeed())
		Expect(env.Client.Create(ctx, harness.NewDGD(ns, "held").Disagg(1, 1, "vllm:v1").Obj())).To(Succeed())
		Eventually(func(g Gomega) {
			d := getDGD(ns, "held")
			c := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1alpha1.ReasonNameConflict))
			g.Expect(c.Message).To(ContainSubstring("Deployment " + ns + "/" + theirs.Name + " exists"))
		}).Should(Succeed())
		var now appsv1.Deployment
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(theirs), &now)).To(Succeed())
		Expect(now.ResourceVersion).To(Equal(theirs.ResourceVersion), "not adopted, labelled or changed")
	})
})
