package gateway_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/test/gateway"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/traffic"
	"github.com/dgd-rollout/operator/traffic/gatewayapi"
)

// entry is the route's name, `{dgd}-{frontend}` for DGD llm and frontend Frontend.
const entry = "llm-frontend"

// errNotControlled is what apply returns for a route the DGD does not control (the
// operator reports a name conflict and writes nothing).
var errNotControlled = errors.New("name held by an object the DGD does not control")

// scenario is one spec's namespace: DGD llm, Gateway public of class test (an HTTP
// listener on 80, routes of its namespace), a Service per cohort, and a recorder of
// the route entry.
type scenario struct {
	ns  string
	dgd *v1alpha1.DynamoGraphDeployment
	rec *recorder
}

func newScenario(cohorts ...string) *scenario {
	s := &scenario{ns: newNamespace()}
	s.dgd = harness.NewDGD(s.ns, "llm").Obj()
	Expect(k8s.Create(ctx, s.dgd)).To(Succeed())
	Expect(k8s.Create(ctx, gateway.Gateway(s.ns, "public", "test", gateway.HTTPListener("http", 80, "")))).To(Succeed())
	for _, h := range cohorts {
		s.service(h)
	}
	s.rec = watchRoute(s.ns, entry)
	DeferCleanup(func() {
		s.rec.Stop()
		Expect(s.rec.seen(func(state) bool { return true })).NotTo(BeEmpty(), "the recorder judged no state")
		Expect(s.rec.Violations()).To(BeEmpty(), "states where Effect disagreed with the suite's rule")
	})
	return s
}

// cohortService is cohort hash's Service, llm-frontend-<hash>-cohort.
func cohortService(hash string) string { return backends.CohortServiceName("llm", "Frontend", hash) }

// service creates cohort hash's Service (ClusterIP, port 8000).
func (s *scenario) service(hash string) {
	Expect(k8s.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: cohortService(hash)},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8000}}, Selector: map[string]string{"cohort": hash}},
	})).To(Succeed())
}

// traffic is the split weights (by cohort hash) through parent Gateways parents of
// the scenario's namespace (public when none).
func (s *scenario) traffic(weights map[string]int32, parents ...string) traffic.Traffic {
	if len(parents) == 0 {
		parents = []string{"public"}
	}
	t := traffic.Traffic{DGD: s.dgd, Frontend: "Frontend", Entry: entry,
		Spec: v1alpha1.TrafficRouting{GatewayAPI: &v1alpha1.GatewayAPIRouting{Hostnames: []gatewayv1.Hostname{"llm.example.com"}}}}
	for _, p := range parents {
		t.Spec.GatewayAPI.ParentRefs = append(t.Spec.GatewayAPI.ParentRefs, gatewayv1.ParentReference{Name: gatewayv1.ObjectName(p)})
	}
	for _, h := range slices.Sorted(maps.Keys(weights)) {
		t.Cohorts = append(t.Cohorts, traffic.Cohort{Hash: h, Service: cohortService(h), Port: 8000, Weight: weights[h]})
	}
	return t
}

// apply writes t's objects as the operator's controller does, from what it cached
// (here the recorder's newest state): creates the route, the DGD as its controller,
// when none is cached; updates it with the cached resourceVersion when it is the
// DGD's and not Same; writes nothing when Same; refuses a route the DGD does not
// control. It returns whether it wrote. Ask the recorder for t first.
func (s *scenario) apply(t traffic.Traffic) (bool, error) {
	rendered, err := gatewayapi.Provider{}.Objects(t)
	Expect(err).NotTo(HaveOccurred())
	Expect(rendered.Create).To(BeEmpty())
	want := rendered.Apply[0].(*gatewayv1.HTTPRoute)
	cached := s.rec.latest().route
	switch {
	case cached == nil:
		Expect(v1alpha1.SetController(want, s.dgd)).To(Succeed())
		return true, k8s.Create(ctx, want)
	case !gatewayapi.Controlled(cached, s.dgd):
		return false, fmt.Errorf("HTTPRoute %s/%s: %w", s.ns, entry, errNotControlled)
	case gatewayapi.Same(cached, want):
		return false, nil
	}
	want.ResourceVersion, want.OwnerReferences = cached.ResourceVersion, cached.OwnerReferences
	return true, k8s.Update(ctx, want)
}

// applied asks the recorder for t and applies it until the write succeeds (a cached
// route older than the server's is refused with a conflict, as in the operator, and
// the watch brings the newer one). It returns t's index in the recorder and whether
// the last attempt wrote.
func (s *scenario) applied(t traffic.Traffic) (int, bool) {
	i := s.rec.ask(t)
	var wrote bool
	Eventually(func() error {
		var err error
		wrote, err = s.apply(t)
		return err
	}).Should(Succeed())
	return i, wrote
}

// key is the route's key.
func (s *scenario) key() types.NamespacedName {
	return types.NamespacedName{Namespace: s.ns, Name: entry}
}

// get reads the route from the API server.
func (s *scenario) get() *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{}
	Expect(k8s.Get(ctx, s.key(), r)).To(Succeed())
	return r
}

// ours is the test controller's status entry for Gateway name, nil when none.
func ours(r *gatewayv1.HTTPRoute, name string) *gatewayv1.RouteParentStatus {
	if r == nil {
		return nil
	}
	for i, p := range r.Status.Parents {
		if p.ControllerName == controllerName && string(p.ParentRef.Name) == name {
			return &r.Status.Parents[i]
		}
	}
	return nil
}
