package e2e

import (
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/test/lws"
	"github.com/dgd-rollout/operator/test/observe"
)

// Issue 22 on the real LWS v0.9.0 controllers: the headless Service LWS creates under a
// LeaderWorkerSet's name is every gang pod's subdomain (pod hostnames and
// LWS_LEADER_ADDRESS resolve through it); the operator's discovery Service of the
// revision is another. Both orders are forced, since on a live cluster either may come
// first: LWS's Service first (the operator may not create Services until every
// LeaderWorkerSet has LWS's), and the operator's first (the LWS controllers are stopped
// until the operator's discovery Services exist). At every observed state the observer
// checks (test/observe/services.go): every gang pod's subdomain Service, once it
// exists, is headless, publishes not-ready addresses and selects the whole gang; every
// discovery Service selects exactly the leaders, on port system 9090, with both
// discovery labels; the DGD is never Ready while a live (service, revision) has no pod
// Dynamo's discovery admits. The scenarios roll to a new image afterwards, in whatever
// order the controllers take.

// order is which of the two Services of a gang's first revision is created first.
type order int

const (
	lwsFirst order = iota
	operatorFirst
)

func (o order) String() string {
	return map[order]string{lwsFirst: "LWS's headless Service first", operatorFirst: "the operator's discovery Service first"}[o]
}

type gangGraph struct {
	fw      string
	workers []gangWorker
	order   order
}

type gangWorker struct {
	name, role      string
	replicas, nodes int32
}

var _ = Describe("multinode gangs that form on a real cluster (issue 22, real LWS controllers)", func() {
	DescribeTable("deploys in a forced Service order, rolls, and every state keeps the gang's DNS and Dynamo's routing true",
		func(gg gangGraph) {
			ns := newNamespace()
			name := fmt.Sprintf("%s-%d", gg.fw, len(gg.workers))
			d := harness.NewDGD(ns, name)
			for _, w := range gg.workers {
				d = d.Worker(w.name, gg.fw, w.role, w.replicas, w.nodes, "img:v1")
			}
			obj := d.Rollout("1", "0").Obj()
			var s *scenario
			switch gg.order {
			case lwsFirst:
				restore := denyServiceCreation()
				DeferCleanup(restore)
				s = begin(obj)
				By("every LeaderWorkerSet has LWS's headless Service before the operator may create any Service")
				Eventually(func(g Gomega) {
					lwss := s.leaderWorkerSets()
					g.Expect(lwss).NotTo(BeEmpty())
					for _, l := range lwss {
						var svc corev1.Service
						g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: l.Name}, &svc)).To(Succeed())
						g.Expect(svc.Labels).To(HaveKeyWithValue("leaderworkerset.sigs.k8s.io/name", l.Name), "LWS's own")
					}
					g.Expect(s.discoveryServices()).To(BeEmpty())
				}, time.Minute, 100*time.Millisecond).Should(Succeed())
				restore()
			case operatorFirst:
				Expect(lwsRunner.Stop()).To(Succeed())
				DeferCleanup(restartLWS)
				s = begin(obj)
				By("the operator's discovery Services exist before LWS's controllers run")
				Eventually(func(g Gomega) {
					lwss := s.leaderWorkerSets()
					g.Expect(lwss).NotTo(BeEmpty())
					for _, l := range lwss {
						var svc corev1.Service
						g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: l.Name}, &svc)).NotTo(Succeed(), "no Service named like %s yet", l.Name)
					}
					g.Expect(s.discoveryServices()).To(HaveLen(len(gg.workers)))
				}, time.Minute, 100*time.Millisecond).Should(Succeed())
				restartLWS()
			}
			s.waitRolledOut(1)
			s.checkGangServices()
			s.update(image("img:v2"))
			s.waitRolledOut(2)
			s.checkGangServices()
			Expect(s.o.Stats().Gangs).To(BeNumerically(">", 0), "gangs formed and were checked")
		},
		Entry("vLLM disaggregated, multinode prefill and decode", gangGraph{fw: harness.VLLM, order: lwsFirst, workers: []gangWorker{
			{"VllmPrefillWorker", v1alpha1.ComponentTypePrefill, 2, 2}, {"VllmDecodeWorker", v1alpha1.ComponentTypeDecode, 1, 2}}}),
		Entry("vLLM aggregated", gangGraph{fw: harness.VLLM, order: operatorFirst, workers: []gangWorker{{"VllmWorker", "", 2, 2}}}),
		Entry("SGLang disaggregated (issue 22's LWS-first graph)", gangGraph{fw: harness.SGLang, order: operatorFirst, workers: []gangWorker{
			{"prefill", v1alpha1.ComponentTypePrefill, 1, 2}, {"decode", v1alpha1.ComponentTypeDecode, 1, 2}}}),
		Entry("SGLang aggregated", gangGraph{fw: harness.SGLang, order: lwsFirst, workers: []gangWorker{{"SGLangWorker", "", 1, 3}}}),
		Entry("TRT-LLM disaggregated", gangGraph{fw: harness.TRTLLM, order: lwsFirst, workers: []gangWorker{
			{"TRTLLMPrefillWorker", v1alpha1.ComponentTypePrefill, 1, 2}, {"TRTLLMDecodeWorker", v1alpha1.ComponentTypeDecode, 1, 2}}}),
		Entry("TRT-LLM aggregated (issue 22's operator-first worker)", gangGraph{fw: harness.TRTLLM, order: operatorFirst, workers: []gangWorker{{"TRTLLMWorker", "", 2, 2}}}),
	)
})

// restartLWS starts the LWS controllers and webhooks again if they are stopped.
func restartLWS() {
	select {
	case <-lwsRunner.Done():
	default:
		return // running
	}
	var err error
	lwsRunner, err = lws.Start(ctx, lws.Options{Config: cl.Config, DisaggregatedSet: true})
	Expect(err).NotTo(HaveOccurred())
}

func (s *scenario) leaderWorkerSets() []lwsv1.LeaderWorkerSet {
	var l lwsv1.LeaderWorkerSetList
	Expect(k8s.List(ctx, &l, client.InNamespace(s.ns), client.MatchingLabels{v1alpha1.LabelGraph: s.name})).To(Succeed())
	return l.Items
}

// discoveryServices are the DGD's worker revisions' discovery Services.
func (s *scenario) discoveryServices() []corev1.Service {
	var l corev1.ServiceList
	Expect(k8s.List(ctx, &l, client.InNamespace(s.ns), client.MatchingLabels{v1alpha1.LabelGraph: s.name}, client.HasLabels{v1alpha1.LabelWorkerHash})).To(Succeed())
	return l.Items
}

// checkGangServices checks a rolled-out state: every gang pod's subdomain Service
// exists and is LWS's own, and the revision's discovery Services are named apart from
// every LeaderWorkerSet.
func (s *scenario) checkGangServices() {
	var svcs corev1.ServiceList
	Expect(k8s.List(ctx, &svcs, client.InNamespace(s.ns))).To(Succeed())
	pods := s.pods()
	byName := map[string]corev1.Service{}
	for _, svc := range svcs.Items {
		byName[svc.Name] = svc
	}
	for _, p := range pods {
		if _, gang := p.Labels["leaderworkerset.sigs.k8s.io/name"]; !gang {
			continue // the frontend's pods
		}
		svc, ok := byName[p.Spec.Subdomain]
		Expect(ok).To(BeTrue(), "pod %s's subdomain Service %s", p.Name, p.Spec.Subdomain)
		Expect(svc.Labels).To(HaveKeyWithValue("leaderworkerset.sigs.k8s.io/name", p.Spec.Subdomain), "LWS's own Service")
	}
	Expect(observe.SubdomainViolations(svcs.Items, pods)).To(BeEmpty())
	Expect(observe.DiscoveryServiceViolations(svcs.Items, pods)).To(BeEmpty())
	d := s.dgd()
	for _, name := range d.WorkerServiceNames() {
		Expect(byName).To(HaveKey(backends.DiscoveryServiceName(d.Name, name, UpdateHash(d))))
	}
}

// denyServiceCreation takes "create" on Services from the operator's ClusterRole (the
// operator runs as its ServiceAccount), and returns what gives it back.
func denyServiceCreation() (restore func()) {
	var role rbacv1.ClusterRole
	Expect(k8s.Get(ctx, client.ObjectKey{Name: "manager-role"}, &role)).To(Succeed())
	original := role.DeepCopy()
	var rules []rbacv1.PolicyRule
	for _, r := range role.Rules {
		if len(r.APIGroups) == 1 && r.APIGroups[0] == "" && containsString(r.Resources, "services") && containsString(r.Verbs, "create") {
			others := r.DeepCopy()
			others.Resources = removeString(r.Resources, "services")
			services := r.DeepCopy()
			services.Resources, services.Verbs = []string{"services"}, removeString(r.Verbs, "create")
			rules = append(rules, *others, *services)
			continue
		}
		rules = append(rules, r)
	}
	role.Rules = rules
	Expect(k8s.Update(ctx, &role)).To(Succeed())
	var once sync.Once
	return func() {
		once.Do(func() {
			Eventually(func() error {
				var cur rbacv1.ClusterRole
				if err := k8s.Get(ctx, client.ObjectKey{Name: "manager-role"}, &cur); err != nil {
					return err
				}
				cur.Rules = original.Rules
				return k8s.Update(ctx, &cur)
			}).Should(Succeed())
		})
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func removeString(list []string, s string) []string {
	var out []string
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}
