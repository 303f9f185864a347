package grove_test

import (
	"fmt"
	"strings"
	"sync"
	"time"

	apicommon "github.com/ai-dynamo/grove/operator/api/common"
	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends/grove"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/test/harness"
)

// A graph Dynamo's own operator runs on its Grove pathway, taken over once Dynamo's
// operator is stopped (its namespace-scope Lease held). Dynamo's objects, as it makes
// them (ai-dynamo/dynamo deploy/operator):
//   - one PodCliqueSet named after the DGD, replicas 1, controlled by it, carrying only
//     the DGD spec's labels and the graph label (internal/dynamo/graph.go
//     GenerateGrovePodCliqueSet; dgd_grove_workloads_reconciler.go reconcilePodCliqueSet:
//     SyncObservedResource with the DGD as owner); a standalone clique per single-node
//     component, named after it lower-cased, its replicas the component's, minAvailable 1
//     (expandSingleNodeRoles, buildCliqueForRole); a scaling group per multinode
//     component named after it, of cliques `<component>-ldr` (1 pod) and
//     `<component>-wkr` (nodeCount-1 pods), replicas the component's, minAvailable 1
//     (expandMultinodeRoles, buildGroveScalingGroupConfig); every clique labelled with
//     its component, type, Dynamo namespace and the discovery labels, a worker's with
//     Dynamo's worker hash (generateLabels; a new DGD's workers carry one:
//     dgd_grove_worker_hash_suffix_envtest_test.go);
//   - a Service `<dgd>-<component>` per component (Kubernetes discovery), controlled by
//     the DGD, selecting component type, Dynamo namespace and component
//     (dgd_grove_stable_resources_reconciler.go reconcileComponentService,
//     GenerateComponentService);
//   - its finalizer on the DGD (controller_common.HandleFinalizer).
//
// The pods are the operator's own rendering of each component (render: Dynamo's pod
// contract, DYNAMO.md), as in the component-pathway specs.
func dynamoGrove(obj *v1alpha1.DynamoGraphDeployment, hash string) (*grovev1.PodCliqueSet, []*corev1.Service) {
	owner := []metav1.OwnerReference{{APIVersion: "nvidia.com/v1beta1", Kind: "DynamoGraphDeployment", Name: obj.Name,
		UID: obj.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	tmpl := grovev1.PodCliqueSetTemplateSpec{StartupType: ptr.To(grovev1.CliqueStartupTypeAnyOrder),
		HeadlessServiceConfig: &grovev1.HeadlessServiceConfig{PublishNotReadyAddresses: true},
		// Dynamo sets it only when configured; Grove's defaulting webhook sets its
		// default otherwise (grove.TerminationDelay), which this suite's check of
		// Grove's validation rules requires.
		TerminationDelay: &metav1.Duration{Duration: grove.TerminationDelay}}
	var svcs []*corev1.Service
	for _, name := range obj.ServiceNames() {
		spec := obj.Spec.Services[name]
		comp := render.Component{DGD: obj, Name: name, Spec: spec}
		if spec.IsWorker() {
			comp.Hash = hash
		}
		lower := strings.ToLower(name)
		clique := func(cname string, role render.Role, gang render.Gang, replicas int32) corev1.PodTemplateSpec {
			pod, err := comp.Pod(role, gang)
			Expect(err).NotTo(HaveOccurred())
			delete(pod.Labels, v1alpha1.LabelManagedBy)
			tmpl.Cliques = append(tmpl.Cliques, &grovev1.PodCliqueTemplateSpec{Name: cname, Labels: pod.Labels,
				Spec: grovev1.PodCliqueSpec{RoleName: cname, Replicas: replicas, MinAvailable: ptr.To[int32](1), PodSpec: pod.Spec}})
			return pod
		}
		var pod corev1.PodTemplateSpec
		if spec.IsMultinode() {
			gang := render.Grove{PCS: obj.Name, Group: lower, Namespace: obj.Namespace}
			pod = clique(lower+"-ldr", render.RoleLeader, gang, 1)
			clique(lower+"-wkr", render.RoleWorker, gang, spec.NodeCount()-1)
			tmpl.Cliques[len(tmpl.Cliques)-1].Spec.MinAvailable = ptr.To(spec.NodeCount() - 1)
			tmpl.PodCliqueScalingGroupConfigs = append(tmpl.PodCliqueScalingGroupConfigs, grovev1.PodCliqueScalingGroupConfig{Name: lower,
				CliqueNames: []string{lower + "-ldr", lower + "-wkr"}, Replicas: ptr.To(spec.DesiredReplicas()), MinAvailable: ptr.To[int32](1)})
		} else {
			pod = clique(lower, render.RoleMain, nil, spec.DesiredReplicas())
		}
		port := corev1.ServicePort{Name: "system", Port: 9090, TargetPort: intstr.FromString("system"), Protocol: corev1.ProtocolTCP}
		if spec.ComponentType == v1alpha1.ComponentTypeFrontend {
			port = corev1.ServicePort{Name: "http", Port: 8000, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}
		}
		l := pod.Labels
		svcs = append(svcs, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: obj.Name + "-" + lower, OwnerReferences: owner,
			Labels: map[string]string{v1alpha1.LabelGraph: obj.Name, v1alpha1.LabelService: name,
				render.LabelDiscoveryBackend: l[render.LabelDiscoveryBackend], render.LabelDiscoveryEnabled: l[render.LabelDiscoveryEnabled]}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{port}, Selector: map[string]string{v1alpha1.LabelComponentType: l[v1alpha1.LabelComponentType],
				render.LabelDynamoNamespace: l[render.LabelDynamoNamespace], v1alpha1.LabelService: l[v1alpha1.LabelService]}}})
	}
	pcs := &grovev1.PodCliqueSet{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: obj.Name, OwnerReferences: owner,
		Labels: map[string]string{v1alpha1.LabelGraph: obj.Name}}, Spec: grovev1.PodCliqueSetSpec{Replicas: 1, Template: tmpl}}
	return pcs, svcs
}

// dynamoGroveIngress is the frontend Ingress Dynamo's operator makes on its Grove
// pathway (ai-dynamo/dynamo deploy/operator/internal/controller/
// dgd_grove_stable_resources_reconciler.go reconcileFrontendIngress: named
// GetDCDResourceName(dgd, component, "") = `<dgd>-frontend`, GenerateComponentIngress's
// spec, synced by SyncResource with the DGD as controller; no label, SyncResource's
// last-applied annotations): one rule, the host to the Service of the same name on
// port 8000. The take-over keeps it (the DGD's already) and brings it to what this
// operator renders, in place.
func dynamoGroveIngress(obj *v1alpha1.DynamoGraphDeployment) *networkingv1.Ingress {
	in := obj.Spec.Services["Frontend"].Ingress
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: obj.Name + "-frontend",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "nvidia.com/v1beta1", Kind: "DynamoGraphDeployment", Name: obj.Name,
				UID: obj.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			Annotations: map[string]string{"nvidia.com/last-applied-hash": "d1a2b3c4e5f6", "nvidia.com/last-applied-generation": "1"}},
		Spec: networkingv1.IngressSpec{IngressClassName: in.IngressControllerClassName, Rules: []networkingv1.IngressRule{{Host: in.Host + "." + *in.HostSuffix,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: obj.Name + "-frontend", Port: networkingv1.ServiceBackendPort{Number: render.PortHTTP}}}}}}}}}},
	}
}

// capacity judges every state the API server goes through (every PodCliqueSet,
// PodClique, PodCliqueScalingGroup and pod event of the namespace): per worker
// service, Σ min(ready, spec.replicas) over the live PodCliques (single-node: ready
// pods) and PodCliqueScalingGroups (multinode: available gangs) of Dynamo's and ours
// (0 once it, or its PodCliqueSet, is being deleted) at least R - maxUnavailable, and a
// ready frontend pod; it records the peak pods per service and the least replicas
// each of Dynamo's components was set to.
type capacity struct {
	mu         sync.Mutex
	events     int
	violations []string
	seen       map[string]bool
	peakPods   map[string]int
	minReady   map[string]int32
	dynamoLow  map[string]int32 // Dynamo's clique or PCSG -> least spec.replicas seen
}

func (c *capacity) check(r client.Reader, dynamoPCS string, want map[string]int32) {
	var sets grovev1.PodCliqueSetList
	var pclqs grovev1.PodCliqueList
	var pcsgs grovev1.PodCliqueScalingGroupList
	var pods corev1.PodList
	for _, l := range []client.ObjectList{&sets, &pclqs, &pcsgs, &pods} {
		if r.List(ctx, l) != nil {
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events++
	deleting := map[string]bool{} // PodCliqueSets being deleted, by name
	for _, p := range sets.Items {
		deleting[p.Name] = !p.DeletionTimestamp.IsZero()
	}
	live := func(o metav1.Object) bool {
		pcs := o.GetLabels()[apicommon.LabelPartOfKey]
		_, ok := deleting[pcs]
		return ok && !deleting[pcs] && o.GetDeletionTimestamp().IsZero()
	}
	ready := map[string]int32{}
	for _, q := range pclqs.Items {
		if q.Labels[apicommon.LabelPodCliqueScalingGroup] == "" && live(&q) {
			ready[q.Labels[v1alpha1.LabelService]] += min(q.Status.ReadyReplicas, q.Spec.Replicas)
			if q.Labels[apicommon.LabelPartOfKey] == dynamoPCS {
				c.low(q.Name, q.Spec.Replicas)
			}
		}
	}
	for _, g := range pcsgs.Items {
		service := g.Name[strings.LastIndex(g.Name, "-0-")+3:] // `<pcs>-0-<group>`: the group is the service here
		if live(&g) {
			ready[service] += min(g.Status.AvailableReplicas, g.Spec.Replicas)
			if g.Labels[apicommon.LabelPartOfKey] == dynamoPCS {
				c.low(g.Name, g.Spec.Replicas)
			}
		}
	}
	count := map[string]int{}
	for _, p := range pods.Items {
		count[p.Labels[v1alpha1.LabelService]]++
	}
	for s, n := range count {
		c.peakPods[s] = max(c.peakPods[s], n)
	}
	for s, floor := range want {
		if _, ok := c.minReady[s]; !ok || ready[s] < c.minReady[s] {
			c.minReady[s] = ready[s]
		}
		if v := fmt.Sprintf("%s: %d ready, fewer than %d", s, ready[s], floor); ready[s] < floor && !c.seen[v] {
			c.seen[v] = true
			c.violations = append(c.violations, v)
		}
	}
}

func (c *capacity) low(name string, replicas int32) {
	if n, ok := c.dynamoLow[name]; !ok || replicas < n {
		c.dynamoLow[name] = replicas
	}
}

var _ = Describe("a graph Dynamo's operator runs on Grove (moving over)", func() {
	It("is taken over: ours rolls out beside Dynamo's PodCliqueSet under the budgets, Dynamo's workers drained to their floor, its PodCliqueSet deleted whole once ours is ready, its Services and finalizer released", func() {
		takeOverGrove("d1a2b3c4")
	})
	It("is taken over when Dynamo's worker cliques carry no worker hash (a graph of before Dynamo's Grove worker hashes: the legacy revision)", func() {
		takeOverGrove("")
	})
})

// takeOverGrove plays the take-over of a graph Dynamo's operator runs on Grove whose
// worker cliques carry hash (or none) and checks it at every state (capacity).
func takeOverGrove(hash string) {
	ns := newNamespace()
	obj := onGrove(harness.NewDGD(ns, "g").Disagg(2, 2, "vllm:v1").Multinode("prefill", 2).Rollout("1", "0")).Obj()
	obj.Finalizers = []string{decide.DynamoFinalizer}
	obj.Spec.Services["Frontend"].Ingress = &v1alpha1.IngressSpec{Enabled: true, Host: "g", HostSuffix: ptr.To("example.com"),
		IngressControllerClassName: ptr.To("nginx")}
	Expect(env.Client.Create(ctx, obj)).To(Succeed())
	theirs, svcs := dynamoGrove(obj, hash)
	Expect(env.Client.Create(ctx, theirs)).To(Succeed())
	for _, s := range svcs {
		Expect(env.Client.Create(ctx, s)).To(Succeed())
	}
	theirIngress := dynamoGroveIngress(obj)
	Expect(env.Client.Create(ctx, theirIngress)).To(Succeed())
	By("Dynamo's operator ran it: its PodCliqueSet serves, ours writes nothing while Dynamo's operator may act")
	Eventually(func(g Gomega) {
		_, err := env.PlayGrove(ctx, ns, obj.Name, -1)
		g.Expect(err).NotTo(HaveOccurred())
		var q grovev1.PodClique
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "g-0-decode"}, &q)).To(Succeed())
		g.Expect(q.Status.ReadyReplicas).To(Equal(int32(2)))
		var pg grovev1.PodCliqueScalingGroup
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "g-0-prefill"}, &pg)).To(Succeed())
		g.Expect(pg.Status.AvailableReplicas).To(Equal(int32(2)))
		var fe grovev1.PodClique
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "g-0-frontend"}, &fe)).To(Succeed())
		g.Expect(fe.Status.ReadyReplicas).To(Equal(int32(1)))
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	Eventually(func(g Gomega) {
		var d v1alpha1.DynamoGraphDeployment
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), &d)).To(Succeed())
		c := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(v1alpha1.ReasonDynamoOperatorActive))
	}).Should(Succeed())
	var sets grovev1.PodCliqueSetList
	Expect(env.Client.List(ctx, &sets, client.InNamespace(ns))).To(Succeed())
	Expect(sets.Items).To(HaveLen(1), "nothing of ours beside Dynamo's before the Lease")

	capa := &capacity{seen: map[string]bool{}, peakPods: map[string]int{}, minReady: map[string]int32{}, dynamoLow: map[string]int32{}}
	want := map[string]int32{"Frontend": 1, "decode": 2, "prefill": 2}
	stop, err := env.Watch(ctx, ns, func(r client.Reader) { capa.check(r, theirs.Name, want) },
		&grovev1.PodCliqueSet{}, &grovev1.PodClique{}, &grovev1.PodCliqueScalingGroup{}, &corev1.Pod{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(stop)

	By("the Lease held: the take-over")
	start := time.Now()
	Expect(env.Client.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: decide.DynamoScopeLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("moving-to-dgd-rollout"), LeaseDurationSeconds: ptr.To[int32](86400),
			RenewTime: &metav1.MicroTime{Time: time.Now()}}})).To(Succeed())
	Eventually(func(g Gomega) {
		changed, err := env.PlayGrove(ctx, ns, obj.Name, 1)
		g.Expect(err).NotTo(HaveOccurred())
		if !changed {
			time.Sleep(100 * time.Millisecond) // the operator's next pass
		}
		var d v1alpha1.DynamoGraphDeployment
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), &d)).To(Succeed())
		g.Expect(d.Finalizers).NotTo(ContainElement(decide.DynamoFinalizer), "Dynamo's finalizer released")
		g.Expect(meta.IsStatusConditionTrue(d.Status.Conditions, v1alpha1.ConditionReady)).To(BeTrue())
		var p grovev1.PodCliqueSet
		err = env.Client.Get(ctx, client.ObjectKeyFromObject(theirs), &p)
		g.Expect(apierrors.IsNotFound(err) || p.UID != theirs.UID).To(BeTrue(), "Dynamo's PodCliqueSet deleted")
	}, 3*time.Minute, 50*time.Millisecond).Should(Succeed())
	took := time.Since(start)

	By("nothing of Dynamo's is left, its frontend Service adopted")
	Eventually(func(g Gomega) {
		_, err := env.PlayGrove(ctx, ns, obj.Name, -1) // the garbage collector of Dynamo's cliques and pods
		g.Expect(err).NotTo(HaveOccurred())
		var pods corev1.PodList
		g.Expect(env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{apicommon.LabelPartOfKey: theirs.Name})).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty(), "pods of Dynamo's PodCliqueSet")
		var pclqs grovev1.PodCliqueList
		g.Expect(env.Client.List(ctx, &pclqs, client.InNamespace(ns), client.MatchingLabels{apicommon.LabelPartOfKey: theirs.Name})).To(Succeed())
		g.Expect(pclqs.Items).To(BeEmpty(), "PodCliques of Dynamo's PodCliqueSet")
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	for _, s := range svcs {
		var got corev1.Service
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(s), &got)
		if s.Name == "g-frontend" {
			Expect(err).NotTo(HaveOccurred())
			Expect(got.UID).To(Equal(s.UID), "Dynamo's frontend Service adopted, never deleted")
			Expect(got.Labels[v1alpha1.LabelManagedBy]).To(Equal(v1alpha1.ManagedByValue))
			continue
		}
		Expect(apierrors.IsNotFound(err) || !got.DeletionTimestamp.IsZero()).To(BeTrue(), "Dynamo's Service %s deleted", s.Name)
	}
	Expect(env.Client.List(ctx, &sets, client.InNamespace(ns))).To(Succeed())
	for _, p := range sets.Items {
		Expect(p.Annotations).To(HaveKey(grove.AnnotationCliques), "only ours left: %s", p.Name)
	}
	var ing networkingv1.Ingress
	Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(theirIngress), &ing)).To(Succeed(), "Dynamo's frontend Ingress kept")
	Expect(ing.UID).To(Equal(theirIngress.UID), "Dynamo's frontend Ingress taken in place, never deleted")
	Expect(ing.Labels[v1alpha1.LabelManagedBy]).To(Equal(v1alpha1.ManagedByValue))
	Expect(ing.Spec.Rules).To(HaveLen(1))
	Expect(ing.Spec.Rules[0].Host).To(Equal("g.example.com"))
	Expect(ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name).To(Equal("g-frontend"))

	capa.mu.Lock()
	defer capa.mu.Unlock()
	GinkgoWriter.Printf("%s Grove take-over (worker hash %q): %s after the Lease; %d events judged; peak pods %v; least ready %v; Dynamo's components' least replicas %v\n",
		ns, hash, took.Round(100*time.Millisecond), capa.events, capa.peakPods, capa.minReady, capa.dynamoLow)
	AddReportEntry("grove take-over", fmt.Sprintf("%s after the Lease, peak pods %v, least ready %v, Dynamo's least replicas %v",
		took.Round(100*time.Millisecond), capa.peakPods, capa.minReady, capa.dynamoLow))
	Expect(capa.violations).To(BeEmpty(), "states with fewer ready than the budgets allow")
	Expect(capa.dynamoLow).To(Equal(map[string]int32{"g-0-frontend": 1, "g-0-decode": 1, "g-0-prefill": 1}),
		"Dynamo's workers scaled down to their floor (minAvailable 1), never below; its frontend untouched")
}
