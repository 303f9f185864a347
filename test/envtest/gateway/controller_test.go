package gateway_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/dgd-rollout/operator/test/gateway"
)

// The test Gateway controller's own rules, on a real API server: what the provider's
// specs rely on it to write.
var _ = Describe("The test Gateway controller", func() {
	// plain is route ns/name to Service ns/svc:8000 through parentRefs.
	plain := func(ns, name, svc string, refs ...gatewayv1.ParentReference) *gatewayv1.HTTPRoute {
		return &gatewayv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: refs},
				Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
					BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(svc), Port: ptr.To(int32(8000))}}}}}},
			},
		}
	}
	parent := func(ns, name string) gatewayv1.ParentReference {
		return gatewayv1.ParentReference{Namespace: ptr.To(gatewayv1.Namespace(ns)), Name: gatewayv1.ObjectName(name)}
	}
	service := func(ns, name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8000}}}}
	}
	// reason is the reason of condition typ of the controller's entry for Gateway gw
	// of route ns/name, once it is for the route's current generation ("" before).
	reason := func(ns, name, gw, typ string) func() string {
		return func() string {
			r := &gatewayv1.HTTPRoute{}
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, r); err != nil {
				return err.Error()
			}
			c := meta.FindStatusCondition(ptr.Deref(ours(r, gw), gatewayv1.RouteParentStatus{}).Conditions, typ)
			if c == nil || c.ObservedGeneration != r.Generation {
				return ""
			}
			return string(c.Status) + "/" + c.Reason
		}
	}
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		Expect(k8s.Create(ctx, gateway.Gateway(ns, "public", "test", gateway.HTTPListener("http", 80, "")))).To(Succeed())
		Expect(k8s.Create(ctx, service(ns, "app"))).To(Succeed())
	})

	It("accepts a route at a listener of its namespace and resolves its Service, no sooner than its delay", func() {
		start := time.Now()
		Expect(k8s.Create(ctx, plain(ns, "r", "app", parent(ns, "public")))).To(Succeed())
		Eventually(reason(ns, "r", "public", "Accepted")).Should(Equal("True/Accepted"))
		Expect(reason(ns, "r", "public", "ResolvedRefs")()).To(Equal("True/ResolvedRefs"))
		Expect(time.Since(start)).To(BeNumerically(">=", delay))
		Expect(gwc.Judged(types.NamespacedName{Namespace: ns, Name: "r"})).To(Equal(int64(1)))
	})

	It("refuses a sectionName no listener has (NoMatchingParent)", func() {
		ref := parent(ns, "public")
		ref.SectionName = ptr.To(gatewayv1.SectionName("https"))
		Expect(k8s.Create(ctx, plain(ns, "r", "app", ref))).To(Succeed())
		Eventually(reason(ns, "r", "public", "Accepted")).Should(Equal("False/NoMatchingParent"))
	})

	It("refuses a namespace the listeners do not admit (NotAllowedByListeners)", func() {
		other := newNamespace()
		Expect(k8s.Create(ctx, service(other, "app"))).To(Succeed())
		Expect(k8s.Create(ctx, plain(other, "r", "app", parent(ns, "public")))).To(Succeed())
		Eventually(reason(other, "r", "public", "Accepted")).Should(Equal("False/NotAllowedByListeners"))
	})

	It("refuses a Service of another namespace until a ReferenceGrant admits it (RefNotPermitted)", func() {
		other := newNamespace()
		Expect(k8s.Create(ctx, service(other, "far"))).To(Succeed())
		r := plain(ns, "r", "far", parent(ns, "public"))
		r.Spec.Rules[0].BackendRefs[0].Namespace = ptr.To(gatewayv1.Namespace(other))
		Expect(k8s.Create(ctx, r)).To(Succeed())
		Eventually(reason(ns, "r", "public", "ResolvedRefs")).Should(Equal("False/RefNotPermitted"))
		Expect(k8s.Create(ctx, &gatewayv1.ReferenceGrant{
			ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "routes-of-" + ns},
			Spec: gatewayv1.ReferenceGrantSpec{
				From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(ns)}},
				To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
			},
		})).To(Succeed())
		Eventually(reason(ns, "r", "public", "ResolvedRefs")).Should(Equal("True/ResolvedRefs"))
	})

	It("refuses a backendRef that is not a Service (InvalidKind)", func() {
		r := plain(ns, "r", "app", parent(ns, "public"))
		r.Spec.Rules[0].BackendRefs[0].Kind = ptr.To(gatewayv1.Kind("ConfigMap"))
		Expect(k8s.Create(ctx, r)).To(Succeed())
		Eventually(reason(ns, "r", "public", "ResolvedRefs")).Should(Equal("False/InvalidKind"))
	})

	It("keeps other controllers' entries as they are and writes none for a Gateway of another class", func() {
		Expect(k8s.Create(ctx, gateway.Gateway(ns, "foreign", "theirs", gateway.HTTPListener("http", 80, "")))).To(Succeed())
		r := plain(ns, "r", "app", parent(ns, "foreign"))
		Expect(k8s.Create(ctx, r)).To(Succeed())
		ref := parent(ns, "foreign")
		ref.Group, ref.Kind = ptr.To(gatewayv1.Group(gatewayv1.GroupName)), ptr.To(gatewayv1.Kind("Gateway")) // as the CRD defaults them
		theirs := gatewayv1.RouteParentStatus{ParentRef: ref, ControllerName: "example.com/other",
			Conditions: []metav1.Condition{{Type: "Accepted", Status: "Unknown", Reason: "Pending", Message: "not yet",
				ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}}}
		r.Status.Parents = []gatewayv1.RouteParentStatus{theirs}
		Expect(k8s.Status().Update(ctx, r)).To(Succeed())

		By("a parentRef to a Gateway of ours added: our entry after theirs, theirs unchanged")
		Eventually(func() error {
			cur := &gatewayv1.HTTPRoute{}
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "r"}, cur); err != nil {
				return err
			}
			cur.Spec.ParentRefs = append(cur.Spec.ParentRefs, parent(ns, "public"))
			return k8s.Update(ctx, cur)
		}).Should(Succeed())
		Eventually(reason(ns, "r", "public", "Accepted")).Should(Equal("True/Accepted"))
		got := &gatewayv1.HTTPRoute{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "r"}, got)).To(Succeed())
		Expect(got.Status.Parents).To(HaveLen(2))
		Expect(got.Status.Parents[0]).To(Equal(theirs))
		Expect(got.Status.Parents[1].ControllerName).To(Equal(gatewayv1.GatewayController(controllerName)))
		Expect(string(got.Status.Parents[1].ParentRef.Name)).To(Equal("public"))
	})
})
