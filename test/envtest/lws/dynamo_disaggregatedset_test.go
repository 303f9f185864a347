package lws_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	disaggv1 "sigs.k8s.io/lws/api/disaggregatedset/v1"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/test/harness"
)

// A graph Dynamo's own operator runs on its DisaggregatedSet pathway (newer Dynamo,
// ai-dynamo/dynamo deploy/operator/internal/controller): its multinode prefill and decode
// workers are the roles of one LWS DisaggregatedSet named after the DGD, labelled with
// the graph and nvidia.com/selector, controlled by the DGD
// (dgd_disaggregatedset_workload_renderer.go Render); LWS's DisaggregatedSet controller
// runs each role as a LeaderWorkerSet `<set>-<revision>-<role>` labelled only
// disaggregatedset.x-k8s.io/{name,role,revision} and app, controlled by the set
// (sigs.k8s.io/lws v0.9.0 pkg/controllers/disaggregatedset lws_manager.go Create;
// pkg/utils/disaggregatedset GenerateName, GenerateLabels). The take-over does not handle
// it: with Dynamo's operator stopped (its Lease held) the DGD reports
// DynamoTakeOverUnsupported naming the set and nothing is written: no LeaderWorkerSet,
// Deployment or Service of ours beside Dynamo's workers, nothing to Dynamo's objects,
// Dynamo's finalizer kept.
var _ = Describe("a graph Dynamo's operator runs on a DisaggregatedSet (moving over)", func() {
	It("is not taken over: DynamoTakeOverUnsupported, nothing created beside Dynamo's DisaggregatedSet, nothing written to it", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "g").Disagg(2, 2, "vllm:v1").Multinode("prefill", 2).Multinode("decode", 2).Obj()
		obj.Finalizers = []string{decide.DynamoFinalizer}
		obj.Annotations = map[string]string{"nvidia.com/enable-disaggregated-set": "true"}
		Expect(env.Client.Create(ctx, obj)).To(Succeed())
		set, err := harness.DynamoDisaggregatedSet(obj, "0a1b2c3d", "prefill", "decode")
		Expect(err).NotTo(HaveOccurred())
		Expect(env.Client.Create(ctx, set)).To(Succeed())
		const revision = "0a1b2c3d"
		children := map[string]*lwsv1.LeaderWorkerSet{}
		for i, role := range []string{"prefill", "decode"} {
			spec := set.Object["spec"].(map[string]any)["roles"].([]any)[i].(map[string]any)["spec"].(map[string]any)
			child := &lwsv1.LeaderWorkerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g-" + revision + "-" + role,
				Labels: map[string]string{"app": "g-" + role, disaggv1.RoleLabelKey: role, disaggv1.SetNameLabelKey: "g", disaggv1.RevisionLabelKey: revision},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: disaggv1.GroupVersion.String(), Kind: "DisaggregatedSet", Name: "g",
					UID: set.GetUID(), Controller: ptr.To(true)}}}}
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &child.Spec)).To(Succeed())
			Expect(env.Client.Create(ctx, child)).To(Succeed())
			children[child.Name] = child
		}
		Expect(env.Client.Create(ctx, harness.DynamoScopeLease(ns))).To(Succeed())

		Eventually(func(g Gomega) {
			var d v1alpha1.DynamoGraphDeployment
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), &d)).To(Succeed())
			c := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1alpha1.ReasonDynamoTakeOverUnsupported))
			g.Expect(c.Message).To(ContainSubstring("DisaggregatedSet g"))
			g.Expect(d.Finalizers).To(ContainElement(decide.DynamoFinalizer), "nothing of Dynamo's is released")
		}).Should(Succeed())
		// The passes that wrote that status wrote nothing else (decide stops before any
		// write): nothing of ours exists, and Dynamo's objects are as they were made.
		var sets lwsv1.LeaderWorkerSetList
		Expect(env.Client.List(ctx, &sets, client.InNamespace(ns))).To(Succeed())
		Expect(sets.Items).To(HaveLen(2), "Dynamo's two LeaderWorkerSets alone")
		for _, l := range sets.Items {
			Expect(children).To(HaveKey(l.Name))
			Expect(l.UID).To(Equal(children[l.Name].UID))
			Expect(l.Generation).To(Equal(children[l.Name].Generation))
		}
		live := harness.NewDisaggregatedSetObject()
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(set), live)).To(Succeed())
		Expect(live.GetGeneration()).To(Equal(set.GetGeneration()))
		Expect(live.GetLabels()).NotTo(HaveKey(v1alpha1.LabelManagedBy))
		var deps appsv1.DeploymentList
		Expect(env.Client.List(ctx, &deps, client.InNamespace(ns))).To(Succeed())
		Expect(deps.Items).To(BeEmpty())
		var svcs corev1.ServiceList
		Expect(env.Client.List(ctx, &svcs, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue})).To(Succeed())
		Expect(svcs.Items).To(BeEmpty())
	})
})
