package grove_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/test/observe"
)

// graph is one multinode scenario of issue 22: a framework, aggregated or
// disaggregated, Dynamo's service names, a DGD name of 2 to 12 characters.
type graph struct {
	dgd, fw string
	// workers: service name -> role ("" aggregated), replicas, nodes per replica.
	workers []worker
	// firstPCS is the name the first revision's PodCliqueSet takes.
	firstPCS string
}

type worker struct {
	name, role      string
	replicas, nodes int32
}

func (g graph) build(ns, image string) *v1alpha1.DynamoGraphDeployment {
	d := onGrove(harness.NewDGD(ns, g.dgd))
	for _, w := range g.workers {
		d = d.Worker(w.name, g.fw, w.role, w.replicas, w.nodes, image)
	}
	return d.Obj()
}

var _ = Describe("Dynamo's multinode graphs on Grove (issue 22)", func() {
	DescribeTable("deploy side by side per revision and roll, every gang pod's subdomain Service Grove's own, Ready only when routable",
		func(g graph) {
			ns := newNamespace()
			first := deploy(g.build(ns, "img:v1"))
			Expect(revisionPCS(first, first.Hashes()[0]).Name).To(Equal(g.firstPCS), "named after the DGD, as Dynamo names its PodCliqueSet")
			checkNames(ns, first)
			update(ns, g.dgd, harness.Image("img:v2"))
			steps, err := env.Drive(ctx, ns, g.dgd, 1, 80, completed)
			Expect(err).NotTo(HaveOccurred())
			last := steps[len(steps)-1]
			Expect(last.Hashes()).To(HaveLen(1))
			two := false
			for _, s := range steps {
				two = two || len(s.Hashes()) == 2
			}
			Expect(two).To(BeTrue(), "the revisions ran side by side")
			checkNames(ns, last)
			Expect(observers[ns].Stats().Gangs).To(BeNumerically(">", 0), "gangs formed and were checked")
		},
		Entry("vLLM disaggregated, DGD vg, multinode VllmPrefillWorker and VllmDecodeWorker (Dynamo's 40 characters; {dgd}-{hash} made 49)",
			graph{dgd: "vg", fw: harness.VLLM, firstPCS: "vg", workers: []worker{
				{"VllmPrefillWorker", v1alpha1.ComponentTypePrefill, 2, 2}, {"VllmDecodeWorker", v1alpha1.ComponentTypeDecode, 1, 2}}}),
		Entry("vLLM disaggregated at Grove's limit exactly (7 + 17 + 21 = 45): the second PodCliqueSet cuts the DGD's name",
			graph{dgd: "llama-3", fw: harness.VLLM, firstPCS: "llama-3", workers: []worker{
				{"VllmPrefillWorker", v1alpha1.ComponentTypePrefill, 1, 2}, {"VllmDecodeWorker", v1alpha1.ComponentTypeDecode, 1, 2}}}),
		Entry("vLLM aggregated, a 12-character DGD, VllmWorker gangs of 2",
			graph{dgd: "vllm-agg-twl", fw: harness.VLLM, firstPCS: "vllm-agg-twl", workers: []worker{{"VllmWorker", "", 2, 2}}}),
		Entry("SGLang disaggregated, multinode decode beside single-node prefill",
			graph{dgd: "sgl-disagg", fw: harness.SGLang, firstPCS: "sgl-disagg", workers: []worker{
				{"SGLangPrefillWorker", v1alpha1.ComponentTypePrefill, 2, 1}, {"SGLangDecode", v1alpha1.ComponentTypeDecode, 1, 2}}}),
		Entry("SGLang aggregated, DGD sg, SGLangWorker gangs of 3",
			graph{dgd: "sg", fw: harness.SGLang, firstPCS: "sg", workers: []worker{{"SGLangWorker", "", 1, 3}}}),
		Entry("TRT-LLM disaggregated, multinode prefill and decode",
			graph{dgd: "trt-dis", fw: harness.TRTLLM, firstPCS: "trt-dis", workers: []worker{
				{"TrtllmPrefill", v1alpha1.ComponentTypePrefill, 1, 2}, {"TrtllmDecode", v1alpha1.ComponentTypeDecode, 1, 2}}}),
		Entry("TRT-LLM aggregated, a 12-character DGD, TrtllmWorker gangs of 2",
			graph{dgd: "trtllm-agg-1", fw: harness.TRTLLM, firstPCS: "trtllm-agg-1", workers: []worker{{"TrtllmWorker", "", 1, 2}}}),
	)
})

// checkNames checks a settled state: every pod's subdomain Service exists and is
// Grove's (headless, not-ready addresses, every member: observe.SubdomainViolations),
// and every live revision and service that runs has its discovery Service, named so that
// it can never be Grove's or LWS's.
func checkNames(ns string, s harness.Snapshot) {
	var pods corev1.PodList
	Expect(env.Client.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
	var svcs corev1.ServiceList
	Expect(env.Client.List(ctx, &svcs, client.InNamespace(ns))).To(Succeed())
	have := map[string]bool{}
	for _, svc := range svcs.Items {
		have[svc.Name] = true
	}
	for _, p := range pods.Items {
		if p.Labels["grove.io/podcliquescalinggroup"] != "" {
			Expect(have).To(HaveKey(p.Spec.Subdomain), "pod %s's subdomain Service", p.Name)
		}
	}
	Expect(observe.SubdomainViolations(svcs.Items, pods.Items)).To(BeEmpty())
	Expect(observe.DiscoveryServiceViolations(svcs.Items, pods.Items)).To(BeEmpty())
	for _, h := range s.Hashes() {
		for _, name := range s.DGD.WorkerServiceNames() {
			Expect(have).To(HaveKey(backends.DiscoveryServiceName(s.DGD.Name, name, h)), fmt.Sprintf("%s at %s", name, h))
		}
	}
}

var _ = Describe("a DGD from an operator that named discovery Services {dgd}-{service}-{hash} (issue 22)", func() {
	It("gets the new discovery Services and loses an old one only once the new one publishes as many ready endpoints; no worker rolls", func() {
		ns := newNamespace()
		s := deploy(onGrove(harness.NewDGD(ns, "up").Disagg(2, 1, "img:v1")).Obj())
		h := s.Hashes()[0]
		pcs := revisionPCS(s, h)
		var now corev1.Service
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: backends.DiscoveryServiceName("up", "decode", h)}, &now)).To(Succeed())
		By("the new discovery Service not published yet: made again while the EndpointSlice controller is held back")
		observers[ns].Stop() // a state built by hand: the Service deleted under a running revision is the test's gap
		env.PauseEndpointSlices(ns)
		DeferCleanup(env.ResumeEndpointSlices, ns)
		var slices discoveryv1.EndpointSliceList
		Expect(env.Client.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: now.Name})).To(Succeed())
		Expect(slices.Items).To(HaveLen(1))
		published := slices.Items[0]
		Expect(env.Client.Delete(ctx, &now)).To(Succeed())
		Expect(env.Client.Delete(ctx, &published)).To(Succeed()) // the garbage collector's part
		var remade corev1.Service
		Eventually(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(&now), &remade) }).Should(Succeed())
		Expect(remade.UID).NotTo(Equal(now.UID))
		By("an old-named discovery Service of the running revision, as the earlier operator left it, with its slice")
		old := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: backends.WorkloadName("up", "decode", h),
			Labels: now.Labels, OwnerReferences: now.OwnerReferences}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			Selector: now.Spec.Selector, Ports: now.Spec.Ports}}
		Expect(env.Client.Create(ctx, old)).To(Succeed())
		oldSlice := published.DeepCopy() // what the EndpointSlice controller writes for the same pods
		oldSlice.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: old.Name + "-x", Labels: map[string]string{},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(old, corev1.SchemeGroupVersion.WithKind("Service"))}}
		for k, v := range published.Labels {
			oldSlice.Labels[k] = v
		}
		oldSlice.Labels[discoveryv1.LabelServiceName] = old.Name
		Expect(env.Client.Create(ctx, oldSlice)).To(Succeed())
		observeNamespace(ns, nil) // routable again through the old-named Service's slice: from here on it is the operator's
		before, err := harness.Reconciles()
		Expect(err).NotTo(HaveOccurred())
		update(ns, "up", func(d *v1alpha1.DynamoGraphDeployment) {
			metav1.SetMetaDataAnnotation(&d.ObjectMeta, "test/touched", "1")
		})
		Eventually(func() float64 { n, _ := harness.Reconciles(); return n }).Should(BeNumerically(">", before), "a pass ran")
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(old), &corev1.Service{})).To(Succeed(), "kept: the new one publishes no endpoint yet")
		By("once the new one publishes, the old one goes")
		env.ResumeEndpointSlices(ns)
		Eventually(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(old), &corev1.Service{}) }, 20*time.Second).ShouldNot(Succeed())
		Expect(readyEndpoints(ns, now.Name)).To(Equal(1))
		after, err := env.Take(ctx, ns, "up")
		Expect(err).NotTo(HaveOccurred())
		Expect(after.Hashes()).To(Equal([]string{h}), "no new revision")
		Expect(revisionPCS(after, h).UID).To(Equal(pcs.UID), "the revision's PodCliqueSet untouched")
	})
})

// readyEndpoints counts the ready endpoints of a Service's EndpointSlices.
func readyEndpoints(ns, service string) int {
	var slices discoveryv1.EndpointSliceList
	Expect(env.Client.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: service})).To(Succeed())
	n := 0
	for _, sl := range slices.Items {
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				n++
			}
		}
	}
	return n
}
