package conformance_test

import (
	"context"
	"errors"
	"fmt"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/grove"
	"github.com/dgd-rollout/operator/cmd/manager/app"
)

// Issue 23: the operator's cache (app.CacheOptions, as the manager runs it) holds its
// own workloads and ControllerRevisions and none of the cluster's others of those
// kinds; a PodClique (Grove's, unfiltered) holds no pod spec.
var _ = Describe("the operator's cache", func() {
	It("holds the operator's Deployments, LeaderWorkerSets, PodCliqueSets and ControllerRevisions only, and none of their pod specs nor PodCliques'", func() {
		nsN++
		ns := fmt.Sprintf("conf-%d", nsN)
		Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		ours := map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelGraph: "g"}
		pod := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}}}
		deploy := func(name string, labels map[string]string) *appsv1.Deployment {
			return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
				Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: pod.Labels}, Template: pod}}
		}
		revision := func(name string, labels map[string]string) *appsv1.ControllerRevision {
			return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
				Revision: 1, Data: runtime.RawExtension{Raw: []byte(`{}`)}}
		}
		// A StatefulSet's revision (of a LeaderWorkerSet of ours, say) carries its pod
		// template's labels, ours among them, and the history package's hash label.
		sts := map[string]string{app.HistoryHashLabel: "5d4b8c9f7"}
		for k, v := range ours {
			sts[k] = v
		}
		lws := func(name string, labels map[string]string) *lwsv1.LeaderWorkerSet {
			return &lwsv1.LeaderWorkerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
				Spec: lwsv1.LeaderWorkerSetSpec{Replicas: ptrTo(int32(1)), StartupPolicy: lwsv1.LeaderCreatedStartupPolicy,
					RolloutStrategy:      lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType},
					LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{Size: ptrTo(int32(1)), WorkerTemplate: pod, RestartPolicy: lwsv1.RecreateGroupOnPodRestart}}}
		}
		pcs := func(name string, labels map[string]string) *grovev1.PodCliqueSet {
			return &grovev1.PodCliqueSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
				Spec: grovev1.PodCliqueSetSpec{Replicas: 1, Template: grovev1.PodCliqueSetTemplateSpec{
					Cliques: []*grovev1.PodCliqueTemplateSpec{{Name: "c", Spec: grovev1.PodCliqueSpec{RoleName: "c", Replicas: 1, PodSpec: pod.Spec}}}}}}
		}
		clique := &grovev1.PodClique{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-0-c",
			Labels: map[string]string{"app.kubernetes.io/managed-by": "grove-operator"}},
			Spec: grovev1.PodCliqueSpec{RoleName: "c", Replicas: 1, PodSpec: pod.Spec}}
		for _, o := range []client.Object{
			deploy("mine", ours), deploy("theirs", map[string]string{"app": "x"}),
			revision("mine", ours), revision("sts-rev", sts), revision("theirs", nil),
			lws("mine", ours), lws("theirs", nil), pcs("mine", ours), pcs("theirs", nil), clique,
		} {
			Expect(env.Client.Create(ctx, o)).To(Succeed(), "%T %s", o, o.GetName())
		}

		c := startCache()

		names := func(list client.ObjectList) []string {
			GinkgoHelper()
			Expect(c.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			var out []string
			Expect(forEach(list, func(o client.Object) { out = append(out, o.GetName()) })).To(Succeed())
			return out
		}
		Eventually(func() []string { return names(&appsv1.DeploymentList{}) }).Should(ConsistOf("mine"))
		Eventually(func() []string { return names(&appsv1.ControllerRevisionList{}) }).Should(ConsistOf("mine"))
		Eventually(func() []string { return names(&lwsv1.LeaderWorkerSetList{}) }).Should(ConsistOf("mine"))
		Eventually(func() []string { return names(&grovev1.PodCliqueSetList{}) }).Should(ConsistOf("mine"))
		var got grovev1.PodClique
		Eventually(func() error { return c.Get(ctx, client.ObjectKeyFromObject(clique), &got) }).Should(Succeed())
		Expect(got.Spec.Replicas).To(Equal(int32(1)))
		Expect(got.Spec.PodSpec.Containers).To(BeEmpty(), "a cached PodClique keeps no pod spec")
		var l lwsv1.LeaderWorkerSet
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mine"}, &l)).To(Succeed())
		Expect(l.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec.Containers).To(BeEmpty(), "a cached LeaderWorkerSet keeps no pod spec")
		Expect(l.Spec.LeaderWorkerTemplate.WorkerTemplate.Labels).To(HaveKeyWithValue("app", "x"), "its pod template's labels are kept")
		var p grovev1.PodCliqueSet
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mine"}, &p)).To(Succeed())
		Expect(p.Spec.Template.Cliques).To(HaveLen(1))
		Expect(p.Spec.Template.Cliques[0].Spec.PodSpec.Containers).To(BeEmpty(), "a cached PodCliqueSet keeps no pod spec")
		Expect(p.Spec.Template.Cliques[0].Spec.Replicas).To(Equal(int32(1)), "its cliques' names and counts are kept")
		var d appsv1.Deployment
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mine"}, &d)).To(Succeed())
		Expect(d.Spec.Template.Spec.Containers).To(BeEmpty(), "a cached Deployment keeps no pod spec")
		Expect(d.Spec.Template.Labels).To(HaveKeyWithValue("app", "x"), "its pod template's labels are kept")
	})
})

// The upgrade from an operator that did not label its workloads, or labels stripped
// while no operator ran: backends.RelabelOwned (app.NewManager runs it before the
// cache starts) labels what a DGD controls and nothing else; a create that answers
// AlreadyExists is judged on the live object (backends.ExistingOnCreate).
var _ = Describe("objects a DGD controls without the operator's label", func() {
	It("are labelled before the cache starts, and nothing else is touched", func() {
		nsN++
		ns := fmt.Sprintf("conf-%d", nsN)
		Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		// envtest runs no garbage collector: an owner reference to a DGD that is not
		// there stays.
		dgdRef := func() []metav1.OwnerReference {
			return []metav1.OwnerReference{{APIVersion: "nvidia.com/v1beta1", Kind: "DynamoGraphDeployment", Name: "old-graph",
				UID: "0b5d3a1e-0000-4000-8000-000000000001", Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}}
		}
		pod := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
		old := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old-graph-decode", OwnerReferences: dgdRef(),
			Labels: map[string]string{"team": "a"}},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: pod.Labels}, Template: pod}}
		theirs := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "theirs"},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: pod.Labels}, Template: pod}}
		rev := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old-graph-abc", OwnerReferences: dgdRef()},
			Revision: 1, Data: runtime.RawExtension{Raw: []byte(`{}`)}}
		// PodCliqueSets the DGD controls: one of ours (grove.AnnotationCliques) of before
		// the label, and the one Dynamo's own operator makes for the DGD, named after it,
		// with the DGD spec's labels and annotations only (GenerateGrovePodCliqueSet): never
		// labelled as ours (grove.NotOurs), or the cache would show it to the Grove backend.
		pcs := func(name string, annotations map[string]string) *grovev1.PodCliqueSet {
			return &grovev1.PodCliqueSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: dgdRef(), Annotations: annotations},
				Spec: grovev1.PodCliqueSetSpec{Replicas: 1, Template: grovev1.PodCliqueSetTemplateSpec{
					Cliques: []*grovev1.PodCliqueTemplateSpec{{Name: "c", Spec: grovev1.PodCliqueSpec{RoleName: "c", Replicas: 1, PodSpec: pod.Spec}}}}}}
		}
		oldSet := pcs("old-graph-1", map[string]string{grove.AnnotationCliques: `{"Frontend":{"clique":"c"}}`})
		dynamoSet := pcs("old-graph", map[string]string{"team": "a"})
		for _, o := range []client.Object{old, theirs, rev, oldSet, dynamoSet} {
			Expect(env.Client.Create(ctx, o)).To(Succeed())
		}
		theirsRV, dynamoRV := theirs.ResourceVersion, dynamoSet.ResourceVersion

		n, err := backends.RelabelOwnedExcept(ctx, env.Client, env.Client, app.NewScheme(), nil, grove.NotOurs,
			&appsv1.Deployment{}, &appsv1.ControllerRevision{}, &lwsv1.LeaderWorkerSet{}, &grovev1.PodCliqueSet{})
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(BeNumerically(">=", 3)) // other specs' namespaces hold none, but run in any order
		for _, o := range []client.Object{old, rev, oldSet} {
			Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			Expect(o.GetLabels()).To(HaveKeyWithValue(v1alpha1.LabelManagedBy, v1alpha1.ManagedByValue), o.GetName())
			Expect(o.GetLabels()).To(HaveKeyWithValue(v1alpha1.LabelGraph, "old-graph"), o.GetName())
		}
		Expect(old.Labels).To(HaveKeyWithValue("team", "a"), "its other labels are kept")
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(theirs), theirs)).To(Succeed())
		Expect(theirs.ResourceVersion).To(Equal(theirsRV), "a Deployment no DGD controls is not written")
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(dynamoSet), dynamoSet)).To(Succeed())
		Expect(dynamoSet.ResourceVersion).To(Equal(dynamoRV), "Dynamo's PodCliqueSet of the DGD is not written")
		n, err = backends.RelabelOwned(ctx, env.Client, env.Client, app.NewScheme(), nil, &appsv1.Deployment{})
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(BeZero(), "a second run finds nothing to do")

		c := startCache()
		Expect(c.Get(ctx, client.ObjectKeyFromObject(old), &appsv1.Deployment{})).To(Succeed(), "the cache shows it")
		Expect(c.Get(ctx, client.ObjectKeyFromObject(rev), &appsv1.ControllerRevision{})).To(Succeed(), "the cache shows it")
	})

	It("a create answering AlreadyExists: ours is relabelled, another owner's is a name conflict", func() {
		nsN++
		ns := fmt.Sprintf("conf-%d", nsN)
		Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}
		Expect(env.Client.Create(ctx, owner)).To(Succeed())
		pod := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
		ours := map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelGraph: "owner"}
		mk := func(name string, controlled bool) *appsv1.Deployment {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: pod.Labels}, Template: pod}}
			if controlled {
				d.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptrTo(true)}}
			}
			return d
		}
		Expect(env.Client.Create(ctx, mk("ours", true))).To(Succeed())
		Expect(env.Client.Create(ctx, mk("theirs", false))).To(Succeed())

		want := mk("ours", true)
		want.Labels = ours
		Expect(env.Client.Create(ctx, want.DeepCopy())).To(MatchError(ContainSubstring("already exists")))
		Expect(backends.ExistingOnCreate(ctx, env.Client, env.Client, want, owner, "Deployment")).To(Succeed())
		var got appsv1.Deployment
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(want), &got)).To(Succeed())
		Expect(got.Labels).To(Equal(ours), "its labels are put back")

		want = mk("theirs", true)
		want.Labels = ours
		err := backends.ExistingOnCreate(ctx, env.Client, env.Client, want, owner, "Deployment")
		var conflict *backends.NameConflictError
		Expect(errors.As(err, &conflict)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("Deployment " + ns + "/theirs exists"))
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "theirs"}, &got)).To(Succeed())
		Expect(got.Labels).To(BeEmpty(), "another owner's is not touched")

		want = mk("gone", true)
		Expect(backends.ExistingOnCreate(ctx, env.Client, env.Client, want, owner, "Deployment")).To(Succeed(), "gone meanwhile: the next pass creates it")
	})
})

// startCache starts a cache with the manager's options for the kinds this envtest
// serves (app.CacheOptionsFor: no Gateway API CRDs here), synced; the spec's cleanup
// stops it.
func startCache() cache.Cache {
	GinkgoHelper()
	opts, err := app.CacheOptionsFor(env.Config)
	Expect(err).NotTo(HaveOccurred())
	opts.Scheme = app.NewScheme()
	c, err := cache.New(env.Config, opts)
	Expect(err).NotTo(HaveOccurred())
	cctx, cancel := context.WithCancel(ctx)
	DeferCleanup(cancel)
	go func() { _ = c.Start(cctx) }()
	Expect(c.WaitForCacheSync(cctx)).To(BeTrue())
	return c
}

func ptrTo[T any](v T) *T { return &v }

func forEach(list client.ObjectList, f func(client.Object)) error {
	items, err := metaExtract(list)
	for _, o := range items {
		f(o)
	}
	return err
}

func metaExtract(list client.ObjectList) ([]client.Object, error) {
	objs, err := apimeta.ExtractList(list)
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(client.Object))
	}
	return out, err
}
