package e2e

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/test/invariants"
)

// dynamoWorkerHash is the worker hash Dynamo's operator gave the graph (8 hex characters:
// DYNAMO-V1BETA1.md §3).
const dynamoWorkerHash = "d1a2b3c4"

// dynamoAPIVersion is the version of Dynamo's API its operator writes objects and owner
// references in (v1beta1: DYNAMO-V1BETA1.md §1, controllers on v1beta1 since PR #9235).
const dynamoAPIVersion = "nvidia.com/v1beta1"

// The hand-over from Dynamo's operator (issue 25 item 4; README "Moving over from
// Dynamo's operator"): the spec plays what Dynamo's operator made for a running DGD, then
// lets ours take it over, under the invariant watcher and the Dynamo observer.
var _ = Describe("Moving over from Dynamo's operator", func() {
	It("rolls the first revision out beside Dynamo's workloads, then removes them, never without a ready frontend, routable workers or the frontend's Ingress", func() {
		obj := harness.NewDGD(newNamespace(), "g").Disagg(1, 1, "img:1").Rollout("1", "0").Obj()
		obj.Spec.Services["Frontend"].Ingress = &v1alpha1.IngressSpec{Enabled: true, Host: "g", HostSuffix: ptr.To("example.com"),
			IngressControllerClassName: ptr.To("nginx")}
		moveOver(obj)
		By("Dynamo's Ingress was adopted (announced in a RolloutStep Event)")
		Expect(rolloutSteps(obj.Namespace, obj.Name)).To(ContainSubstring("adopted Ingress g-frontend (host g.example.com) from Dynamo's operator"))
	})

	It("takes over multinode workers Dynamo ran as LeaderWorkerSets, a gang at a time, never without a ready frontend or routable workers", func() {
		obj := harness.NewDGD(newNamespace(), "g").Disagg(2, 2, "img:1").Multinode("prefill", 2).Multinode("decode", 2).Rollout("1", "0").Obj()
		moveOver(obj)
		// The steps the operator announces: Dynamo's gangs go one at a time through the
		// scale subresource. (A drain of Dynamo's gangs that comes too early is the
		// capacity watch's to catch: moveOver, watchCapacity.)
		By("Dynamo's LeaderWorkerSets were scaled down a gang at a time (their scale subresource), then deleted")
		said := rolloutSteps(obj.Namespace, obj.Name)
		for _, c := range []string{"decode", "prefill"} {
			set := "g-" + c + "-" + dynamoWorkerHash + "-0"
			Expect(said).To(ContainSubstring("scaled %s 2→1", set))
			Expect(said).To(ContainSubstring("deleted LeaderWorkerSet %s (revision 0 drained)", set))
		}
	})
})

// rolloutSteps are the messages of the DGD's RolloutStep Events, one a line.
func rolloutSteps(ns, name string) string {
	var evs corev1.EventList
	Expect(k8s.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "DynamoGraphDeployment" && e.InvolvedObject.Name == name && e.Reason == v1alpha1.EventRolloutStep {
			out = append(out, e.Message)
		}
	}
	return strings.Join(out, "\n")
}

// moveOver plays what Dynamo's operator made for the running graph obj (a Deployment
// per single-node component, a LeaderWorkerSet per multinode one: dynamoObjects), checks
// that ours holds off until Dynamo's namespace-scope Lease is held, then that ours takes
// the graph over under the invariant watcher and the Dynamo observer and that nothing of
// Dynamo's is left but the frontend Service, adopted.
func moveOver(obj *v1alpha1.DynamoGraphDeployment) {
	Expect(cluster.InstallMissingCRDs(ctx, cl.Config, filepath.Join(cluster.RepoRoot(), "test", "testdata", "dynamo-dcd"))).To(Succeed())
	ns := obj.Namespace
	obj.Finalizers = []string{decide.DynamoFinalizer}
	s := begin(obj)
	DeferCleanup(func() { // runs before the scenario's own cleanup removes the DGD
		var evs corev1.EventList
		_ = k8s.List(ctx, &evs, client.InNamespace(ns))
		for _, e := range evs.Items {
			GinkgoWriter.Printf("event %s %s/%s: %s %s\n", e.LastTimestamp, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	})

	By("no Lease yet: ours takes nothing over (Ready False, DynamoOperatorActive)")
	s.until("the operator holds off", func(d *v1alpha1.DynamoGraphDeployment, _ []corev1.Pod) bool {
		c := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonDynamoOperatorActive
	})

	By("what Dynamo's operator made: DCDs, their Deployments or LeaderWorkerSets and Services, the discovery RBAC")
	dgd := s.dgd()
	dynamoObjects(dgd)
	Eventually(func(g Gomega) {
		var deps appsv1.DeploymentList
		g.Expect(k8s.List(ctx, &deps, client.InNamespace(ns))).To(Succeed())
		var sets lwsv1.LeaderWorkerSetList
		g.Expect(k8s.List(ctx, &sets, client.InNamespace(ns))).To(Succeed())
		g.Expect(len(deps.Items) + len(sets.Items)).To(Equal(len(dgd.Spec.Services)))
		for _, d := range deps.Items {
			g.Expect(d.Status.AvailableReplicas).To(Equal(ptr.Deref(d.Spec.Replicas, 1)), d.Name)
		}
		for _, l := range sets.Items {
			g.Expect(l.Status.ReadyReplicas).To(Equal(ptr.Deref(l.Spec.Replicas, 1)), l.Name)
		}
	}, time.Minute, 100*time.Millisecond).Should(Succeed())
	Eventually(func(g Gomega) {
		fv, err := s.o.Frontend(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fv.ReadyGenerations()).To(HaveLen(1), "Dynamo's generation discovered")
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	capacity := watchCapacity(ns, invariants.ServicesOf(dgd))
	var frontendSvc corev1.Service
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "g-frontend"}, &frontendSvc)).To(Succeed())
	var exposure func() (int, []string)
	var dynamoIng networkingv1.Ingress
	host := ""
	if ing := dgd.Spec.Services["Frontend"].Ingress; ing != nil && ing.Enabled {
		host = ing.Host + "." + *ing.HostSuffix
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "g-frontend"}, &dynamoIng)).To(Succeed())
		exposure = watchIngress(ns, host)
		gcCanary(ns, metav1.GetControllerOf(&dynamoIng))
	}
	c := meta.FindStatusCondition(s.dgd().Status.Conditions, v1alpha1.ConditionReady)
	Expect(c.Reason).To(Equal(v1alpha1.ReasonDynamoOperatorActive), "ours still holds off")

	By("holding Dynamo's namespace-scope Lease: ours takes over")
	Expect(k8s.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: decide.DynamoScopeLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("moving-to-dgd-rollout"), LeaseDurationSeconds: ptr.To[int32](86400),
			RenewTime: &metav1.MicroTime{Time: time.Now()}}})).To(Succeed())
	s.waitRolledOut(1)

	By("nothing of Dynamo's is left but the frontend Service, adopted (same UID)")
	Eventually(func(g Gomega) {
		d := s.dgd()
		g.Expect(d.Finalizers).NotTo(ContainElement(decide.DynamoFinalizer))
		var dcds unstructured.UnstructuredList
		dcds.SetAPIVersion("nvidia.com/v1alpha1")
		dcds.SetKind("DynamoComponentDeploymentList")
		g.Expect(k8s.List(ctx, &dcds, client.InNamespace(ns))).To(Succeed())
		g.Expect(dcds.Items).To(BeEmpty())
		var deps appsv1.DeploymentList
		g.Expect(k8s.List(ctx, &deps, client.InNamespace(ns))).To(Succeed())
		for _, dep := range deps.Items {
			g.Expect(metav1.IsControlledBy(&dep, d)).To(BeTrue(), "Deployment %s", dep.Name)
		}
		var sets lwsv1.LeaderWorkerSetList
		g.Expect(k8s.List(ctx, &sets, client.InNamespace(ns))).To(Succeed())
		for _, l := range sets.Items {
			g.Expect(metav1.IsControlledBy(&l, d)).To(BeTrue(), "LeaderWorkerSet %s", l.Name)
		}
		var svc corev1.Service
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "g-frontend"}, &svc)).To(Succeed())
		g.Expect(svc.UID).To(Equal(frontendSvc.UID), "the frontend Service is adopted, never deleted")
		g.Expect(metav1.IsControlledBy(&svc, d)).To(BeTrue())
		for _, name := range []string{"g-decode-" + dynamoWorkerHash, "g-prefill-" + dynamoWorkerHash} {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Service{})
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
			g.Expect(err).To(HaveOccurred(), "Dynamo's Service %s is gone", name)
		}
	}, time.Minute, 100*time.Millisecond).Should(Succeed())
	events, violations := capacity()
	Expect(events).To(BeNumerically(">", 0), "workload events judged")
	Expect(violations).To(BeEmpty(), "ready replicas the workloads of a worker service count on")
	if exposure == nil {
		return
	}
	By("the garbage collector has handled the frontend DCD's deletion (its canary dependent is gone)")
	// The DCD's CRD was installed moments before the canary was made, so the collector's
	// REST mapper may not know the kind yet: it learns new kinds at its discovery sync,
	// every 30 s, and until then requeues the canary's node with the controller rate
	// limiter's backoff, 5 ms doubling (k8s.io/kubernetes v1.36.2
	// cmd/kube-controller-manager/app/core.go garbageCollectorController.Run, syncPeriod;
	// pkg/controller/garbagecollector/garbagecollector.go attemptToDeleteWorker,
	// restMappingError; graph_builder.go DefaultTypedControllerRateLimiter). Its next try
	// can then come as long after the sync as the sync came after the first failure:
	// about a minute after the canary was made, more on a loaded machine (a clean-clone
	// run, Dec 2: not collected 60 s after the DCD's deletion). Hence 3 minutes.
	Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gc-canary"}, &corev1.ConfigMap{})
	}, 3*time.Minute, 100*time.Millisecond).Should(MatchError(ContainSubstring("not found")))
	By("Dynamo's Ingress is the DGD's now, the same object; an Ingress routed the frontend's host at every state")
	events, violations = exposure()
	Expect(events).To(BeNumerically(">", 1), "Ingress events judged")
	Expect(violations).To(BeEmpty(), "states without an Ingress for %s", host)
	var ing networkingv1.Ingress
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "g-frontend"}, &ing)).To(Succeed())
	Expect(ing.UID).To(Equal(dynamoIng.UID), "Dynamo's Ingress adopted, never deleted")
	Expect(metav1.IsControlledBy(&ing, s.dgd())).To(BeTrue())
	Expect(ing.OwnerReferences).To(HaveLen(1), "the DCD is no owner any more")
	Expect(ing.Labels).To(HaveKeyWithValue(v1alpha1.LabelManagedBy, v1alpha1.ManagedByValue))
}

// gcCanary creates a ConfigMap the test owns whose one owner is the DCD dcd (a plain
// owner reference): the garbage collector deletes it once it handles the DCD's
// deletion, which is when it would delete Dynamo's Ingress too were that still the
// DCD's. Its disappearance is the positive signal that the collector has acted.
func gcCanary(ns string, dcd *metav1.OwnerReference) {
	Expect(dcd).NotTo(BeNil())
	ref := *dcd
	ref.Controller, ref.BlockOwnerDeletion = nil, nil
	Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gc-canary",
		OwnerReferences: []metav1.OwnerReference{ref}}})).To(Succeed())
}

// watchIngress judges every event of the namespace's Ingresses: after each, at least
// one Ingress not being deleted routes host (a rule of that host). The garbage
// collector of the control plane's kube-controller-manager deletes an Ingress whose
// controller, a DCD of Dynamo's, is deleted (background propagation): without the
// adoption, the frontend's host would have no Ingress from that deletion until ours is
// created. It returns how many events it judged and the violations, and logs the
// Ingresses routing the host (UID, controller) at every event.
func watchIngress(ns, host string) func() (int, []string) {
	return judgeEvents(ns, "Ingress watch", []client.Object{&networkingv1.Ingress{}}, func(c cache.Cache, event string) []string {
		var list networkingv1.IngressList
		if c.List(ctx, &list) != nil {
			return nil
		}
		var routing []string
		for _, ing := range list.Items {
			ctl := "none"
			if ref := metav1.GetControllerOf(&ing); ref != nil {
				ctl = ref.Kind + "/" + ref.Name
			}
			if ing.DeletionTimestamp.IsZero() && slices.ContainsFunc(ing.Spec.Rules, func(r networkingv1.IngressRule) bool { return r.Host == host }) {
				routing = append(routing, fmt.Sprintf("%s(uid %s, controller %s)", ing.Name, ing.UID, ctl))
			}
		}
		GinkgoWriter.Printf("%s Ingress watch: %s: routing %s: %v\n", ns, event, host, routing)
		if len(routing) == 0 {
			return []string{fmt.Sprintf("after %s: no Ingress routes %s", event, host)}
		}
		return nil
	})
}

// watchCapacity judges, at every event of the namespace's workloads (Deployments and
// LeaderWorkerSets, Dynamo's and ours alike: the watcher judges only the DGD's own), the
// replicas each worker service can count on: over its live workloads, each one's ready
// replicas (Deployment availableReplicas, LeaderWorkerSet readyReplicas: whole gangs) up
// to its spec.replicas, none of one being deleted, at least R - maxUnavailable. A
// scale-down or deletion of Dynamo's workload lowers it at once, before the pods go, and
// the operator may make it only once ours are ready, which the same watch stream shows
// earlier. The pod-level availability check sees a drain of Dynamo's workers that comes
// too early only when the garbage collector takes Dynamo's gangs down (LeaderWorkerSet,
// its StatefulSets, their pods) before KWOK readies our new ones (PodReadyDelay, 1 s;
// model loading takes minutes on GPUs): measured with an operator whose routable counted
// none of Dynamo's leaders (both LeaderWorkerSets deleted in its first pass), the
// watcher missed it at load ~5 and caught it at load ~16. It returns how many events it
// judged and the violations.
func watchCapacity(ns string, services []invariants.Service) func() (int, []string) {
	seen := map[string]bool{}
	return judgeEvents(ns, "capacity", []client.Object{&appsv1.Deployment{}, &lwsv1.LeaderWorkerSet{}}, func(c cache.Cache, _ string) []string {
		ready := map[string]int32{}
		var deps appsv1.DeploymentList
		var sets lwsv1.LeaderWorkerSetList
		if c.List(ctx, &deps) != nil || c.List(ctx, &sets) != nil {
			return nil
		}
		count := func(o metav1.Object, spec *int32, n int32) {
			if l := o.GetLabels(); l[v1alpha1.LabelWorkerHash] != "" && o.GetDeletionTimestamp().IsZero() {
				ready[l[v1alpha1.LabelService]] += min(n, ptr.Deref(spec, 1))
			}
		}
		for i := range deps.Items {
			count(&deps.Items[i], deps.Items[i].Spec.Replicas, deps.Items[i].Status.AvailableReplicas)
		}
		for i := range sets.Items {
			count(&sets.Items[i], sets.Items[i].Spec.Replicas, sets.Items[i].Status.ReadyReplicas)
		}
		var violations []string
		for _, svc := range services {
			if v := fmt.Sprintf("%s: %d ready replicas counted on, fewer than %d-%d", svc.Name, ready[svc.Name], svc.Replicas, svc.Unavail); ready[svc.Name] < svc.Replicas-svc.Unavail && !seen[v] {
				seen[v] = true
				violations = append(violations, v)
			}
		}
		return violations
	})
}

// judgeEvents starts a cache of namespace ns and, at every add, update and delete of
// the kinds (one at a time), has judge read the state after it from the cache and say
// what it finds wrong. It returns how many events were judged and the violations; the
// cleanup (before the scenario's removes the DGD) stops the cache and logs them as
// "<ns> <what>".
func judgeEvents(ns, what string, kinds []client.Object, judge func(c cache.Cache, event string) []string) func() (int, []string) {
	c, err := cache.New(cl.Config, cache.Options{Scheme: app.NewScheme(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	Expect(err).NotTo(HaveOccurred())
	var mu sync.Mutex
	events := 0
	var violations []string
	on := func(verb string, o any) {
		mu.Lock()
		defer mu.Unlock()
		events++
		name := "?"
		if m, ok := o.(metav1.Object); ok {
			name = m.GetName()
		}
		violations = append(violations, judge(c, verb+" "+name)...)
	}
	for _, kind := range kinds {
		inf, err := c.GetInformer(ctx, kind)
		Expect(err).NotTo(HaveOccurred())
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) { on("add", o) }, UpdateFunc: func(_, o any) { on("update", o) }, DeleteFunc: func(o any) { on("delete", o) }})
		Expect(err).NotTo(HaveOccurred())
	}
	cctx, cancel := context.WithCancel(ctx)
	DeferCleanup(func() {
		cancel()
		mu.Lock()
		defer mu.Unlock()
		GinkgoWriter.Printf("%s %s: %d events judged, violations %v\n", ns, what, events, violations)
	})
	go func() { _ = c.Start(cctx) }()
	Expect(c.WaitForCacheSync(cctx)).To(BeTrue())
	return func() (int, []string) {
		mu.Lock()
		defer mu.Unlock()
		return events, slices.Clone(violations)
	}
}

// dynamoObjects creates what Dynamo's operator makes for dgd on its component pathway
// (ai-dynamo/dynamo deploy/operator; i25-handover-facts.md §1a, §1c), in the order it
// makes them (the DGD's discovery RBAC first: dgdDiscoveryReconciler runs before the
// component workloads, whose pods use that ServiceAccount):
//   - the discovery ServiceAccount, Role and RoleBinding (internal/discovery
//     GetK8sDiscoveryServiceAccount, -Role, -RoleBinding), labelled managed-by
//     dynamo-operator, controlled by the DGD;
//   - a DCD per component (internal/dynamo/graph.go GenerateDynamoComponentsDeployments):
//     `<dgd>-<lower(component)>`, workers `-<worker hash>`, labelled with the component, the
//     Dynamo namespace and the DGD's name (workers also the worker hash), carrying
//     nvidia.com/finalizer (controller_common.HandleFinalizer), controlled by the DGD
//     (controller_common.SyncResource: ctrl.SetControllerReference);
//   - its Deployment (dynamocomponentdeployment_controller.go generateDeployment): the
//     DCD's name and labels, selector nvidia.com/selector=<dcd name>, RollingUpdate
//     25%/25%, the pod of DYNAMO.md (rendered here by render, which follows it), controlled
//     by the DCD; for a multinode component a LeaderWorkerSet `<dcd>-0` instead
//     (dynamoLeaderWorkerSet);
//   - its Service (internal/controller dcdWorkloadRenderer.generateService ->
//     internal/dynamo/graph.go GenerateComponentService): named after the DCD (so a
//     worker's carries the worker hash), labelled with the DCD's labels
//     (GetDCDKubeLabels) and the two discovery labels, ClusterIP, selecting component
//     type, Dynamo namespace and component (a multinode one's only gang leaders:
//     role=leader), controlled by the DCD.
//
// Owner references name API version nvidia.com/v1beta1: Dynamo's controllers read and
// write v1beta1 objects since PR #9235 (DYNAMO-V1BETA1.md §1), and SetControllerReference
// takes the owner's version from them. None carries our managed-by label.
func dynamoObjects(dgd *v1alpha1.DynamoGraphDeployment) {
	ns := dgd.Namespace
	ctrlRef := func(apiVersion, kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	}
	dgdRef := ctrlRef(dynamoAPIVersion, "DynamoGraphDeployment", dgd.Name, dgd.UID)
	sa := render.DiscoveryServiceAccount(dgd.Name)
	rbacLabels := func(name string) map[string]string {
		return map[string]string{"app.kubernetes.io/managed-by": "dynamo-operator", "app.kubernetes.io/component": "rbac", "app.kubernetes.io/name": name}
	}
	Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa, Labels: rbacLabels(sa), OwnerReferences: dgdRef}})).To(Succeed())
	Expect(k8s.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa + "-role", Labels: rbacLabels(sa), OwnerReferences: dgdRef},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "pods"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"nvidia.com"}, Resources: []string{"dynamoworkermetadatas"}, Verbs: []string{"create", "get", "list", "watch", "update", "patch", "delete"}},
		}})).To(Succeed())
	Expect(k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa + "-binding", Labels: rbacLabels(sa), OwnerReferences: dgdRef},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: sa + "-role"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}})).To(Succeed())
	for _, name := range dgd.ServiceNames() {
		spec := dgd.Spec.Services[name]
		hash := ""
		if spec.IsWorker() {
			hash = dynamoWorkerHash
		}
		dcdName := dgd.Name + "-" + strings.ToLower(name) // GetDCDResourceName
		if hash != "" {
			dcdName += "-" + hash
		}
		labels := map[string]string{v1alpha1.LabelService: name, render.LabelDynamoNamespace: render.DynamoNamespace(dgd), v1alpha1.LabelGraph: dgd.Name}
		if hash != "" {
			labels[v1alpha1.LabelWorkerHash] = hash
		}
		if spec.ComponentType != "" {
			labels[v1alpha1.LabelComponentType] = spec.ComponentType
		}
		dcd := &unstructured.Unstructured{}
		dcd.SetAPIVersion(dynamoAPIVersion)
		dcd.SetKind(decide.DCDKind)
		dcd.SetNamespace(ns)
		dcd.SetName(dcdName)
		dcd.SetLabels(labels)
		dcd.SetFinalizers([]string{decide.DynamoFinalizer})
		dcd.SetAnnotations(map[string]string{"nvidia.com/last-applied-generation": "1"})
		dcd.SetOwnerReferences(dgdRef)
		Expect(k8s.Create(ctx, dcd)).To(Succeed())
		dcdRef := ctrlRef(dynamoAPIVersion, decide.DCDKind, dcdName, dcd.GetUID())

		comp := render.Component{DGD: dgd, Name: name, Spec: spec, Hash: hash}
		if spec.IsMultinode() {
			dynamoLeaderWorkerSet(comp, dcdName, labels, dcdRef)
		} else {
			pod, err := comp.Pod(render.RoleMain, nil)
			Expect(err).NotTo(HaveOccurred())
			delete(pod.Labels, v1alpha1.LabelManagedBy)
			pod.Labels[render.LabelSelector] = dcdName
			quarter := intstr.FromString("25%")
			Expect(k8s.Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: dcdName, Labels: labels, OwnerReferences: dcdRef},
				Spec: appsv1.DeploymentSpec{Replicas: ptr.To(spec.DesiredReplicas()),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{render.LabelSelector: dcdName}},
					Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
						RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &quarter, MaxUnavailable: &quarter}},
					Template: pod},
			})).To(Succeed())
		}

		svcName := dcdName // generateService: ServiceName dcd.Name
		svcLabels := maps.Clone(labels)
		svcLabels[render.LabelDiscoveryBackend], svcLabels[render.LabelDiscoveryEnabled] = render.DiscoveryKubernetes, "true"
		port := corev1.ServicePort{Name: render.PortNameSystem, Port: render.PortSystem, TargetPort: intstr.FromString(render.PortNameSystem), Protocol: corev1.ProtocolTCP}
		if spec.ComponentType == v1alpha1.ComponentTypeFrontend {
			port = corev1.ServicePort{Name: render.PortNameHTTP, Port: render.PortHTTP, TargetPort: intstr.FromString(render.PortNameHTTP), Protocol: corev1.ProtocolTCP}
		}
		selector := map[string]string{
			v1alpha1.LabelComponentType: spec.ComponentType, render.LabelDynamoNamespace: render.DynamoNamespace(dgd), v1alpha1.LabelService: name}
		if spec.IsMultinode() {
			selector[render.LabelRole] = string(render.RoleLeader) // generateService: dcd.IsMultinode()
		}
		Expect(k8s.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svcName, OwnerReferences: dcdRef, Labels: svcLabels},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{port}, Selector: selector},
		})).To(Succeed())
		if in := spec.Ingress; in != nil && in.Enabled && in.IngressControllerClassName != nil {
			dynamoIngress(ns, dcdName, in, dcdRef)
		}
	}
	GinkgoWriter.Printf("created Dynamo's objects of %s/%s\n", ns, dgd.Name)
}

// dynamoIngress creates the Ingress Dynamo's DCD controller makes for a DCD whose
// ingress is enabled with a class (ai-dynamo/dynamo deploy/operator/internal/controller/
// dynamocomponentdeployment_controller.go createOrUpdateOrDeleteIngress, generateIngress;
// internal/dynamo/graph.go GenerateComponentIngress, getIngressHost): named
// NormalizeKubeResourceName(dcd), no label, SyncResource's annotations
// nvidia.com/last-applied-hash and -generation, the DCD as controller
// (ctrl.SetControllerReference: blockOwnerDeletion too); one rule, host
// `[hostPrefix]host.<hostSuffix>`, path / (Prefix), to the Service of the same name on
// port 8000; TLS when the spec names a Secret.
func dynamoIngress(ns, dcdName string, in *v1alpha1.IngressSpec, dcdRef []metav1.OwnerReference) {
	host := ptr.Deref(in.HostPrefix, "") + in.Host + "." + *in.HostSuffix
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: dcdName, OwnerReferences: dcdRef,
			Annotations: map[string]string{"nvidia.com/last-applied-hash": "d1a2b3c4e5f6", "nvidia.com/last-applied-generation": "1"}},
		Spec: networkingv1.IngressSpec{IngressClassName: in.IngressControllerClassName, Rules: []networkingv1.IngressRule{{Host: host,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: dcdName, Port: networkingv1.ServiceBackendPort{Number: render.PortHTTP}}}}}}}}}},
	}
	if in.TLS != nil {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{host}, SecretName: in.TLS.SecretName}}
	}
	Expect(k8s.Create(ctx, ing)).To(Succeed())
}

// dynamoLeaderWorkerSet creates the LeaderWorkerSet Dynamo's DCD controller makes for a
// multinode component (ai-dynamo/dynamo deploy/operator/internal/controller:
// dynamocomponentdeployment_controller.go generateLeaderWorkerSet, leaderWorkerSetName;
// dcdWorkloadRenderer.renderMultinodePodTemplateSpecs): named `<dcd>-0`, labelled with
// the DCD's labels (GetDCDKubeLabels), replicas the component's (each a gang: LWS
// scales natively since Dynamo dropped one LeaderWorkerSet per replica), size
// nodeCount, startupPolicy LeaderCreated, no rollout strategy or network config of its
// own (LWS's webhook defaults them), controlled by the DCD (SyncResource). The leader's
// and the workers' templates are the component's pod for each role with `role:
// leader|worker` and without nvidia.com/selector (generate{Leader,Worker}PodTemplateSpec
// delete it), rendered here by render, which follows DYNAMO.md.
func dynamoLeaderWorkerSet(comp render.Component, dcdName string, labels map[string]string, dcdRef []metav1.OwnerReference) {
	tmpl := func(role render.Role) corev1.PodTemplateSpec {
		t, err := comp.Pod(role, render.LWS{})
		Expect(err).NotTo(HaveOccurred())
		delete(t.Labels, v1alpha1.LabelManagedBy)
		delete(t.Labels, render.LabelSelector)
		Expect(t.Labels).To(HaveKeyWithValue(render.LabelRole, string(role)))
		return t
	}
	leader := tmpl(render.RoleLeader)
	Expect(k8s.Create(ctx, &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: comp.DGD.Namespace, Name: dcdName + "-0", Labels: labels, OwnerReferences: dcdRef},
		Spec: lwsv1.LeaderWorkerSetSpec{Replicas: ptr.To(comp.Spec.DesiredReplicas()), StartupPolicy: lwsv1.LeaderCreatedStartupPolicy,
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{LeaderTemplate: &leader, WorkerTemplate: tmpl(render.RoleWorker),
				Size: ptr.To(comp.Spec.NodeCount())}},
	})).To(Succeed())
}
