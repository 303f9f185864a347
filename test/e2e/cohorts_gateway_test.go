package e2e

import (
	"fmt"
	"maps"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/test/gateway"
)

// gatewayController is the controllerName of the test Gateway controller these specs run.
const gatewayController gatewayv1.GatewayController = "example.com/e2e-gateway"

// startGateway runs the test Gateway controller (test/gateway, written from the Gateway
// API spec) until the spec ends, with a GatewayClass of its own and, when name is set,
// Gateway ns/name of that class with an HTTP listener admitting routes of its namespace.
func startGateway(ns, name string) {
	GinkgoHelper()
	class := "e2e-" + ns
	Expect(k8s.Create(ctx, gateway.GatewayClass(class, gatewayController))).To(Succeed())
	DeferCleanup(func() {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, gateway.GatewayClass(class, gatewayController)))).To(Succeed())
	})
	if name != "" {
		Expect(k8s.Create(ctx, gateway.Gateway(ns, name, class, gateway.HTTPListener("http", 80, "")))).To(Succeed())
	}
	c := &gateway.Controller{Name: gatewayController, Delay: 100 * time.Millisecond}
	stop, err := c.Start(cl.Config)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(stop()).To(Succeed()) })
}

// throughGateway routes the DGD's cohorts through an HTTPRoute attached to Gateway
// parent of its namespace, draining a cohort drain seconds once its weight 0 is in
// effect.
func throughGateway(d *v1alpha1.DynamoGraphDeployment, parent string, drain int32) *v1alpha1.DynamoGraphDeployment {
	if d.Spec.Rollout == nil {
		d.Spec.Rollout = &v1alpha1.RolloutSpec{}
	}
	d.Spec.Rollout.TrafficRouting = &v1alpha1.TrafficRouting{GatewayAPI: &v1alpha1.GatewayAPIRouting{
		ParentRefs: []gatewayv1.ParentReference{{Name: gatewayv1.ObjectName(parent)}}, DrainSeconds: ptr.To(drain)}}
	return d
}

var _ = Describe("Cohorts: a Dynamo upgrade through the Gateway API (the test Gateway controller writes route status)", func() {
	It("upgrades Dynamo through an HTTPRoute: weights on routable cohorts only, the old cohort removed once its weight 0 is accepted", func() {
		upgradeThroughGateway(0)
	})

	It("upgrades Dynamo through an HTTPRoute, the old cohort kept drainSeconds once its weight 0 is accepted", func() {
		Skip("operator bug (controllers/decide traffic.go, for the lead): a cohort the plan drains is left out of status.cohorts (cohortsAfter " +
			"drops cohorts at 0 after the pass), so its drainingSince is never recorded, cohortDrained starts the drain at every pass's now, and " +
			"with drainSeconds 1 the rollout holds at TrafficDraining \"revision 1's cohort drains for 1s through the Gateway\" for good " +
			"(seen 3 minutes, the route accepted at its generation with the new cohort alone). Remove this Skip once fixed.")
		upgradeThroughGateway(1)
	})

	It("shows a parentRef to a Gateway that does not exist on the DGD (Ready False naming it, a Warning Event) and touches nothing running", func() {
		Skip("the operator does not do this yet (controllers/decide, for the lead): on a Dynamo upgrade with a parentRef to a Gateway that does not " +
			"exist, it runs the prelude (the shared frontend replaced by revision 1's cohort frontend) and the rollout (revision 2's workers and " +
			"cohort frontend created, revision 1's prefill scaled 2 -> 1), then holds at TrafficDraining; Ready is False with reason ReplicasNotReady " +
			"\"7/7 replicas ready (4 desired, 3 more while revisions run side by side), rollout InProgress\", not naming the Gateway (only " +
			"Progressing, Reconciling and status.traffic do), and no Warning Event names it (notServing fires only once the phase is Completed " +
			"or Paused). Remove this Skip once fixed.")
		ns := newNamespace()
		startGateway(ns, "")
		s := start(throughGateway(gpus(upgradable(ns, "nogw", 2, 1).Obj()), "absent", 0))
		dumpTrafficOnFailure(s)
		before := deploymentsOf(s)
		s.update(dynamoUpgrade("1.7.0"))
		gw := fmt.Sprintf("Gateway %s/absent", ns)
		// Within a pass (a few seconds here) the DGD says so, and nothing that runs is
		// touched: every property is checked at each poll, and all that are missing at
		// the end are named.
		var missing []string
		Eventually(func() []string {
			missing = nil
			d := s.dgd()
			if c := readyCondition(d); d.Status.ObservedGeneration != d.Generation || c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, gw) {
				missing = append(missing, fmt.Sprintf("Ready False naming %s (Ready is %+v)", gw, c))
			}
			var list eventsv1.EventList
			Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			warned := false
			for _, e := range list.Items {
				warned = warned || e.Type == corev1.EventTypeWarning && e.Regarding.Name == s.name && strings.Contains(e.Note, gw)
			}
			if !warned {
				missing = append(missing, "a Warning Event naming "+gw)
			}
			if now := deploymentsOf(s); !maps.Equal(now, before) {
				missing = append(missing, fmt.Sprintf("the running workloads untouched (before %v, now %v)", before, now))
			}
			return missing
		}, 20*time.Second, 250*time.Millisecond).Should(BeEmpty(), "the DGD's status: %s", Summary(s.dgd()))
		Consistently(func() map[string]int32 { return deploymentsOf(s) }, 5*time.Second, 250*time.Millisecond).Should(Equal(before),
			"the running workloads (the shared frontend, revision 1's workers) are left as they were, nothing added")
		// The Gateway made: the rollout goes on through it.
		Expect(k8s.Create(ctx, gateway.Gateway(ns, "absent", "e2e-"+ns, gateway.HTTPListener("http", 80, "")))).To(Succeed())
		s.waitRolledOut(2)
	})
})

// dumpTrafficOnFailure prints, if the spec fails, the DGD's status.traffic and
// status.cohorts and its HTTPRoute as the API server holds them (what a failed wait
// needs to be understood).
func dumpTrafficOnFailure(s *scenario) {
	DeferCleanup(func() {
		if !CurrentSpecReport().Failed() {
			return
		}
		d := s.dgd()
		b, _ := yaml.Marshal(map[string]any{"traffic": d.Status.Traffic, "cohorts": d.Status.Cohorts, "rollingUpdate": d.Status.RollingUpdate, "conditions": d.Status.Conditions})
		GinkgoWriter.Printf("%s/%s status:\n%s\n", s.ns, s.name, b)
		var routes gatewayv1.HTTPRouteList
		if k8s.List(ctx, &routes, client.InNamespace(s.ns)) == nil {
			for _, r := range routes.Items {
				b, _ := yaml.Marshal(map[string]any{"generation": r.Generation, "spec": r.Spec, "status": r.Status})
				GinkgoWriter.Printf("HTTPRoute %s:\n%s\n", r.Name, b)
			}
		}
	})
}

// upgradeThroughGateway runs a Dynamo upgrade of a DGD whose cohorts are routed by an
// HTTPRoute to Gateway "public" (the test controller judging it), draining a cohort
// drain seconds once its weight 0 is accepted, and checks the end: only the new
// revision's pods, no proxy, the route at 100 on the new cohort accepted at its
// generation, the entry Service on the frontends, and the observer saw traffic sent to
// cohorts through the route.
func upgradeThroughGateway(drain int32) {
	GinkgoHelper()
	ns := newNamespace()
	startGateway(ns, "public")
	s := start(throughGateway(gpus(upgradable(ns, "gw", 4, 2).Obj()), "public", drain))
	dumpTrafficOnFailure(s)
	s.update(dynamoUpgrade("1.7.0"))
	s.waitRolledOut(2)

	d := s.dgd()
	hash := UpdateHash(d)
	for _, p := range s.pods() {
		Expect(p.Labels[v1alpha1.LabelTrafficProxy]).To(BeEmpty(), "no proxy through a Gateway: %s", p.Name)
		Expect(p.Labels[v1alpha1.LabelWorkerHash]).To(Equal(hash), "pod %s of service %s is not of the update revision's cohort", p.Name, p.Labels[v1alpha1.LabelService])
	}
	entry := decide.EntryName(d, "Frontend")
	var route gatewayv1.HTTPRoute
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: entry}, &route)).To(Succeed())
		var refs []string
		for _, r := range route.Spec.Rules {
			for _, b := range r.BackendRefs {
				refs = append(refs, fmt.Sprintf("%s=%d", b.Name, ptr.Deref(b.Weight, 1)))
			}
		}
		g.Expect(refs).To(Equal([]string{backends.CohortServiceName(d.Name, "Frontend", hash) + "=100"}), "the route's backendRefs")
		g.Expect(route.Status.Parents).To(HaveLen(1))
		for _, c := range route.Status.Parents[0].Conditions {
			if c.Type == string(gatewayv1.RouteConditionAccepted) || c.Type == string(gatewayv1.RouteConditionResolvedRefs) {
				g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Type)
				g.Expect(c.ObservedGeneration).To(Equal(route.Generation), c.Type)
			}
		}
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	var svc corev1.Service
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: entry}, &svc)).To(Succeed())
	Expect(svc.Spec.Selector).NotTo(HaveKey(v1alpha1.LabelTrafficProxy), "in-cluster clients reach the cohorts' frontends through the entry Service")
	st := s.o.Stats()
	GinkgoWriter.Printf("%s/%s cohorts: %d states with cohorts, %d with traffic to a cohort, %d to two or more\n", s.ns, s.name, st.CohortStates, st.TrafficStates, st.SplitStates)
	Expect(st.TrafficStates).To(BeNumerically(">", 0), "the observer saw no traffic sent to a cohort through the route")
	Expect(st.SplitStates).To(BeNumerically(">", 0), "the observer never saw the route send to two cohorts at once")
}

// deploymentsOf is the DGD's live Deployments (not being deleted) and their replicas,
// the proxy's aside, by name.
func deploymentsOf(s *scenario) map[string]int32 {
	var list appsv1.DeploymentList
	Expect(k8s.List(ctx, &list, client.InNamespace(s.ns), client.MatchingLabels{v1alpha1.LabelGraph: s.name})).To(Succeed())
	out := map[string]int32{}
	for _, d := range list.Items {
		if d.DeletionTimestamp.IsZero() && d.Labels[v1alpha1.LabelTrafficProxy] == "" {
			out[d.Name] = ptr.Deref(d.Spec.Replicas, 1)
		}
	}
	return out
}
