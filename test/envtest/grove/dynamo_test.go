package grove_test

import (
	"time"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends/grove"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/test/harness"
)

// A graph Dynamo's own operator runs on its Grove pathway: one PodCliqueSet named after
// the DGD, controlled by it, carrying only the DGD spec's labels and annotations, a
// clique per single-node component with Dynamo's pod (ai-dynamo/dynamo
// internal/dynamo/graph.go GenerateGrovePodCliqueSet; dgd_grove_workloads_reconciler.go
// reconcilePodCliqueSet: SyncObservedResource with the DGD as owner). The take-over does
// not handle it yet: with Dynamo's operator stopped (its Lease held) the DGD reports
// DynamoTakeOverUnsupported and nothing is written: no PodCliqueSet of ours beside
// Dynamo's (which would stay routed to for good), no label on Dynamo's.
var _ = Describe("a graph Dynamo's operator runs on Grove (moving over)", func() {
	It("is not taken over: DynamoTakeOverUnsupported, nothing created beside Dynamo's PodCliqueSet, nothing written to it", func() {
		ns := newNamespace()
		obj := onGrove(harness.NewDGD(ns, "g").Disagg(1, 1, "vllm:v1")).Obj()
		obj.Finalizers = []string{decide.DynamoFinalizer}
		Expect(env.Client.Create(ctx, obj)).To(Succeed())
		var cliques []*grovev1.PodCliqueTemplateSpec
		for _, name := range obj.ServiceNames() {
			spec := obj.Spec.Services[name]
			hash := ""
			if spec.IsWorker() {
				hash = "d1a2b3c4"
			}
			pod, err := render.Component{DGD: obj, Name: name, Spec: spec, Hash: hash}.Pod(render.RoleMain, nil)
			Expect(err).NotTo(HaveOccurred())
			delete(pod.Labels, v1alpha1.LabelManagedBy)
			role := map[string]string{"Frontend": "frontend", "prefill": "prefill", "decode": "decode"}[name]
			cliques = append(cliques, &grovev1.PodCliqueTemplateSpec{Name: role, Labels: pod.Labels,
				Spec: grovev1.PodCliqueSpec{RoleName: role, Replicas: spec.DesiredReplicas(), MinAvailable: ptr.To[int32](1), PodSpec: pod.Spec}})
		}
		theirs := &grovev1.PodCliqueSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: obj.Name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "nvidia.com/v1beta1", Kind: "DynamoGraphDeployment", Name: obj.Name,
				UID: obj.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
			Spec: grovev1.PodCliqueSetSpec{Replicas: 1, Template: grovev1.PodCliqueSetTemplateSpec{Cliques: cliques,
				StartupType:           ptr.To(grovev1.CliqueStartupTypeAnyOrder),
				HeadlessServiceConfig: &grovev1.HeadlessServiceConfig{PublishNotReadyAddresses: true},
				// Dynamo sets it only when configured; Grove's defaulting webhook sets its
				// default otherwise (grove.TerminationDelay), which this suite's check of
				// Grove's validation rules requires.
				TerminationDelay: &metav1.Duration{Duration: grove.TerminationDelay}}}}
		Expect(env.Client.Create(ctx, theirs)).To(Succeed())
		Expect(env.Client.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: decide.DynamoScopeLease},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("moving-to-dgd-rollout"), LeaseDurationSeconds: ptr.To[int32](86400),
				RenewTime: &metav1.MicroTime{Time: time.Now()}}})).To(Succeed())

		Eventually(func(g Gomega) {
			var d v1alpha1.DynamoGraphDeployment
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), &d)).To(Succeed())
			c := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1alpha1.ReasonDynamoTakeOverUnsupported))
			g.Expect(c.Message).To(ContainSubstring("PodCliqueSet " + obj.Name))
			g.Expect(d.Finalizers).To(ContainElement(decide.DynamoFinalizer), "nothing of Dynamo's is released")
		}).Should(Succeed())
		// The passes that wrote that status wrote nothing else (decide stops before any
		// write): nothing of ours exists, and Dynamo's PodCliqueSet is as it was made.
		var sets grovev1.PodCliqueSetList
		Expect(env.Client.List(ctx, &sets, client.InNamespace(ns))).To(Succeed())
		Expect(sets.Items).To(HaveLen(1))
		Expect(sets.Items[0].UID).To(Equal(theirs.UID))
		Expect(sets.Items[0].Generation).To(Equal(theirs.Generation))
		Expect(sets.Items[0].Labels).NotTo(HaveKey(v1alpha1.LabelManagedBy))
		var deps appsv1.DeploymentList
		Expect(env.Client.List(ctx, &deps, client.InNamespace(ns))).To(Succeed())
		Expect(deps.Items).To(BeEmpty())
		var svcs corev1.ServiceList
		Expect(env.Client.List(ctx, &svcs, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue})).To(Succeed())
		Expect(svcs.Items).To(BeEmpty())
	})
})
