package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	disaggv1 "sigs.k8s.io/lws/api/disaggregatedset/v1"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/test/harness"
)

// A graph Dynamo's operator runs on its DisaggregatedSet pathway (newer Dynamo,
// ai-dynamo/dynamo deploy/operator/internal/controller dgd_disaggregatedset_*): its
// multinode workers are the roles of one DisaggregatedSet named after the DGD and
// controlled by it (dgd_disaggregatedset_workload_renderer.go Render, renderRole), which
// LWS's real DisaggregatedSet controller (in process here) runs as LeaderWorkerSets, and
// the LWS controller as gangs of pods on KWOK nodes. With Dynamo's operator stopped (its
// Lease held) ours must not take it over half: it holds the DGD
// (DynamoTakeOverUnsupported) and writes nothing, Dynamo's gangs keep running.
var _ = Describe("Moving over from Dynamo's DisaggregatedSet pathway", func() {
	It("holds the DGD (DynamoTakeOverUnsupported): nothing created beside Dynamo's DisaggregatedSet, nothing written to it, its gangs keep running", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "g").Disagg(1, 1, "img:1").Multinode("prefill", 2).Multinode("decode", 2).Obj()
		obj.Finalizers = []string{decide.DynamoFinalizer}
		obj.Annotations = map[string]string{"nvidia.com/enable-disaggregated-set": "true"}
		Expect(k8s.Create(ctx, obj)).To(Succeed())
		DeferCleanup(func() { // Dynamo's finalizer stays (held): take it off, then the GC takes the rest
			Expect(client.IgnoreNotFound(k8s.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))))).To(Succeed())
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, obj))).To(Succeed())
			Eventually(func() ([]corev1.Pod, error) {
				var pods corev1.PodList
				err := k8s.List(ctx, &pods, client.InNamespace(ns))
				return pods.Items, err
			}, 2*time.Minute, 200*time.Millisecond).Should(BeEmpty())
		})

		// Dynamo's per-DGD discovery ServiceAccount (on every pathway: i25-handover-facts.md
		// §1c, internal/discovery GetK8sDiscoveryServiceAccount), which its pods run as.
		sa := render.DiscoveryServiceAccount(obj.Name)
		Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "dynamo-operator", "app.kubernetes.io/component": "rbac", "app.kubernetes.io/name": sa},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: dynamoAPIVersion, Kind: "DynamoGraphDeployment", Name: obj.Name,
				UID: obj.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}}})).To(Succeed())
		By("Dynamo's DisaggregatedSet runs its two roles: LeaderWorkerSets made by LWS's DisaggregatedSet controller, their gangs ready")
		set, err := harness.DynamoDisaggregatedSet(obj, dynamoWorkerHash, "prefill", "decode")
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Create(ctx, set)).To(Succeed())
		theirs := map[string]lwsv1.LeaderWorkerSet{}
		Eventually(func(g Gomega) {
			var sets lwsv1.LeaderWorkerSetList
			g.Expect(k8s.List(ctx, &sets, client.InNamespace(ns))).To(Succeed())
			g.Expect(sets.Items).To(HaveLen(2))
			for _, l := range sets.Items {
				g.Expect(metav1.GetControllerOf(&l)).NotTo(BeNil())
				g.Expect(metav1.GetControllerOf(&l).Kind).To(Equal("DisaggregatedSet"))
				g.Expect(l.Labels).To(HaveKeyWithValue(disaggv1.SetNameLabelKey, "g"))
				g.Expect(l.Labels).NotTo(HaveKey(v1alpha1.LabelGraph), "LWS's DisaggregatedSet controller gives them only its labels")
				g.Expect(l.Status.ReadyReplicas).To(Equal(int32(1)), l.Name)
				theirs[l.Name] = l
			}
		}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())

		By("holding Dynamo's namespace-scope Lease: ours holds the DGD")
		Expect(k8s.Create(ctx, harness.DynamoScopeLease(ns))).To(Succeed())
		Eventually(func(g Gomega) {
			var d v1alpha1.DynamoGraphDeployment
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), &d)).To(Succeed())
			c := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1alpha1.ReasonDynamoTakeOverUnsupported))
			g.Expect(c.Message).To(ContainSubstring("DisaggregatedSet g"))
			g.Expect(d.Finalizers).To(ContainElement(decide.DynamoFinalizer), "nothing of Dynamo's is released")
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

		By("nothing of ours, nothing written to Dynamo's: its DisaggregatedSet and LeaderWorkerSets at their generations, their gangs ready")
		var sets lwsv1.LeaderWorkerSetList
		Expect(k8s.List(ctx, &sets, client.InNamespace(ns))).To(Succeed())
		Expect(sets.Items).To(HaveLen(2))
		for _, l := range sets.Items {
			Expect(theirs).To(HaveKey(l.Name))
			Expect(l.UID).To(Equal(theirs[l.Name].UID))
			Expect(l.Generation).To(Equal(theirs[l.Name].Generation))
			Expect(l.Status.ReadyReplicas).To(Equal(int32(1)), l.Name)
		}
		live := harness.NewDisaggregatedSetObject()
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(set), live)).To(Succeed())
		Expect(live.GetGeneration()).To(Equal(set.GetGeneration()))
		Expect(live.GetLabels()).NotTo(HaveKey(v1alpha1.LabelManagedBy))
		var deps appsv1.DeploymentList
		Expect(k8s.List(ctx, &deps, client.InNamespace(ns))).To(Succeed())
		Expect(deps.Items).To(BeEmpty())
		var svcs corev1.ServiceList
		Expect(k8s.List(ctx, &svcs, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue})).To(Succeed())
		Expect(svcs.Items).To(BeEmpty())
	})
})
