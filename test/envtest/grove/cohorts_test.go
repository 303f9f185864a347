package grove_test

import (
	"fmt"
	"sort"
	"sync"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends/grove"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/test/dynamoview"
	"github.com/dgd-rollout/operator/test/gateway"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/test/observe"
)

// The test Gateway controller (test/gateway) judges the routes of Gateways of this
// class, so that a cohort's weight is in effect once the route's status says so.
const (
	gatewayClass      = "test"
	gatewayController = "example.com/test-gateway"
)

// cohortRules judges, at every state the namespace's observer sees, from the live
// objects, the one cohort rule test/observe's own cohort checks (discovery: each
// frontend pod's filter and what it discovers; traffic; the entry Service's ready
// endpoint, which run in every namespace) leave out: every revision whose workers are
// ready (a ready generation, its worker pods live) has a ready frontend pod, not being
// deleted, that discovers it ready, whether it takes traffic or not.
type cohortRules struct {
	dgd *v1alpha1.DynamoGraphDeployment // namespace and name
	mu  sync.Mutex
	// revisionsRouted are the Dynamo namespaces found ready with a ready frontend.
	revisionsRouted map[string]bool
}

func newCohortRules(ns, name string) *cohortRules {
	return &cohortRules{dgd: &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, revisionsRouted: map[string]bool{}}
}

// check is observe.Options.Check.
func (r *cohortRules) check(s observe.State) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fronted(s)
}

// fronted: every revision whose workers are ready and live has a ready frontend that
// discovers it ready.
func (r *cohortRules) fronted(s observe.State) []string {
	var out []string
	all := s.View.Frontend(r.dgd.Namespace, dynamoview.GlobalNamespace, false) // every namespace: what is ready
	for _, g := range all.ReadyGenerations() {
		if !liveWorkers(s.View, r.dgd.Namespace, g.Namespace) {
			continue // its pods are gone, its slices not yet updated: it is being removed
		}
		found := false
		for i := range s.Pods {
			p := &s.Pods[i]
			rt, ok := dynamoview.RuntimeOf(p)
			if !ok || !rt.Frontend || p.DeletionTimestamp != nil || !podReady(p) {
				continue
			}
			for _, rg := range s.View.FrontendFor(rt).ReadyGenerations() {
				found = found || rg.Namespace == g.Namespace
			}
		}
		if !found {
			out = append(out, fmt.Sprintf("revision %s has ready workers and no ready frontend that discovers them", g.Namespace))
			continue
		}
		r.revisionsRouted[g.Namespace] = true
	}
	return out
}

// liveWorkers reports whether a Dynamo namespace has a visible worker instance whose pod
// is live (not gone, not being deleted).
func liveWorkers(v dynamoview.View, k8sNamespace, dynamoNamespace string) bool {
	for _, in := range v.Instances(k8sNamespace) {
		for _, ns := range in.DynamoNamespaces() {
			if ns == dynamoNamespace && in.Pod != nil && in.Pod.DeletionTimestamp == nil {
				return true
			}
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// routed lists the Dynamo namespaces found ready with a ready frontend.
func (r *cohortRules) routed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for ns := range r.revisionsRouted {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// frontendPCS tells a cohort frontend's PodCliqueSet: a worker hash and the frontend's
// service label.
func frontendPCS(p *grovev1.PodCliqueSet) bool {
	return p.Labels[v1alpha1.LabelWorkerHash] != "" && p.Labels[v1alpha1.LabelService] == "Frontend"
}

// cohortsCompleted: Completed with nothing left but the update revision's two
// PodCliqueSets, its workers' and its frontend's.
func cohortsCompleted(s harness.Snapshot) bool {
	if !s.Completed() || len(s.PCS) != 2 {
		return false
	}
	for _, p := range s.PCS {
		if p.Labels[v1alpha1.LabelWorkerHash] != s.UpdateHash() || !p.DeletionTimestamp.IsZero() {
			return false
		}
	}
	return true
}

var _ = Describe("cohorts on Grove", func() {
	It("upgrades Dynamo (frontend and workers together) on a multinode disaggregated graph through cohorts: each revision's frontend a PodCliqueSet of its own, discovering only its revision", func() {
		rules := newCohortRules("", "coh")
		ns := newNamespaceChecked(rules.check)
		rules.dgd.Namespace = ns
		Expect(env.Client.Create(ctx, gateway.Gateway(ns, "gw", gatewayClass, gateway.HTTPListener("http", 80, "")))).To(Succeed())
		d := onGrove(harness.NewDGD(ns, "coh").Disagg(2, 2, "vllm:v1").Multinode("prefill", 2).Multinode("decode", 2)).Obj()
		d.Spec.Services["Frontend"].Replicas = ptr.To[int32](2)
		d.Spec.Rollout = &v1alpha1.RolloutSpec{TrafficRouting: &v1alpha1.TrafficRouting{GatewayAPI: &v1alpha1.GatewayAPIRouting{
			ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}, DrainSeconds: ptr.To[int32](0)}}}
		old := deploy(d).Hashes()[0]

		By("a Dynamo upgrade: the frontend's and every worker's image in one edit (spec.rollout.frontends Auto)")
		update(ns, "coh", func(d *v1alpha1.DynamoGraphDeployment) {
			harness.SetImage(d, "vllm:v2")
			d.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1"
		})
		steps, err := env.Drive(ctx, ns, "coh", 1, 80, cohortsCompleted)
		Expect(err).NotTo(HaveOccurred())
		last := steps[len(steps)-1]
		fresh := last.UpdateHash()
		Expect(fresh).NotTo(Equal(old))

		By("the prelude: the running revision's frontend made its own before the next revision started, the shared one gone first")
		prelude := false
		for i, st := range steps {
			shared := stablePCS(st, "Frontend") != nil
			started := revisionPCS(st, fresh) != nil
			Expect(shared && started).To(BeFalse(), "step %d: the shared frontend runs beside revision %s", i, fresh)
			for j := range st.PCS {
				prelude = prelude || frontendPCS(&st.PCS[j]) && st.PCS[j].Labels[v1alpha1.LabelWorkerHash] == old
			}
		}
		Expect(prelude).To(BeTrue(), "no step had revision %s's own frontend", old)

		By("what is left: the new revision's workers' PodCliqueSet and its frontend's, one standalone clique of minAvailable 1")
		var workers, fe *grovev1.PodCliqueSet
		for i := range last.PCS {
			if p := &last.PCS[i]; frontendPCS(p) {
				fe = p
			} else {
				workers = p
			}
		}
		Expect(fe).NotTo(BeNil())
		Expect(workers).NotTo(BeNil())
		Expect(names(workers.Spec.Template)).To(Equal("decode-ldr decode-wkr decode[decode-ldr,decode-wkr] prefill-ldr prefill-wkr prefill[prefill-ldr,prefill-wkr]"), "no frontend clique among the workers")
		Expect(names(fe.Spec.Template)).To(Equal("frontend"))
		Expect(fe.Labels).To(HaveKey(grove.LabelStableHash))
		c := fe.Spec.Template.Cliques[0]
		Expect(ptr.Deref(c.Spec.MinAvailable, 0)).To(Equal(int32(1)))
		Expect(c.Spec.PodSpec.Containers[0].Image).To(Equal("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1"))
		Expect(last.Pool(fresh)).To(Equal(map[string]int32{"prefill": 2, "decode": 2, "Frontend": 2}))

		By("every revision was fronted by a frontend of its own, and the observer judged the cohorts at every state")
		Expect(rules.routed()).To(ContainElements(render.EffectiveNamespace(&last.DGD, true, old), render.EffectiveNamespace(&last.DGD, true, fresh)))
		st := observers[ns].Stats()
		Expect(st.CohortStates).To(BeNumerically(">", 0), "no state was judged with cohorts")
		Expect(st.TrafficStates).To(BeNumerically(">", 0), "no state sent traffic to a cohort through the HTTPRoute")
		Expect(st.SplitStates).To(BeNumerically(">", 0), "the traffic was never split between the two cohorts")
	})
})
