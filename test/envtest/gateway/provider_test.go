package gateway_test

import (
	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/gateway"
	"github.com/dgd-rollout/operator/traffic"
	"github.com/dgd-rollout/operator/traffic/gatewayapi"
)

var _ = Describe("The Gateway API provider", func() {
	inEffect := func(s *scenario, i int) func() bool {
		return func() bool { return s.rec.effect(i).InEffect }
	}
	// judgedAt: the state's route is at generation gen and the test controller's
	// entry for public was judged for generation judged.
	judgedAt := func(gen, judged int64) func(state) bool {
		return func(st state) bool {
			p := ours(st.route, "public")
			if p == nil || st.route.Generation != gen {
				return false
			}
			c := meta.FindStatusCondition(p.Conditions, "Accepted")
			return c != nil && c.ObservedGeneration == judged
		}
	}

	It("puts a split in effect only once the Gateway has judged the route's current generation", func() {
		s := newScenario("aaaaaaaa", "bbbbbbbb")
		first, wrote := s.applied(s.traffic(map[string]int32{"aaaaaaaa": 90, "bbbbbbbb": 10}))
		Expect(wrote).To(BeTrue())
		Eventually(inEffect(s, first)).Should(BeTrue())
		Expect(s.rec.effect(first).Weights).To(Equal(map[string]int32{"aaaaaaaa": 90, "bbbbbbbb": 10}))
		created := s.rec.seen(func(st state) bool { return st.route != nil })[0]
		Expect(created.route.Status.Parents).To(BeEmpty())
		Expect(created.effects[first]).To(Equal(traffic.Effect{
			Message: "HTTPRoute " + s.ns + "/llm-frontend: parent Gateway " + s.ns + "/public has not accepted it (no status entry)"}))

		By("a weight change: generation 2, not in effect until the controller has judged it")
		second, wrote := s.applied(s.traffic(map[string]int32{"aaaaaaaa": 50, "bbbbbbbb": 50}))
		Expect(wrote).To(BeTrue())
		Eventually(inEffect(s, second)).Should(BeTrue())
		Expect(s.get().Generation).To(Equal(int64(2)))
		Expect(gwc.Judged(s.key())).To(Equal(int64(2)))
		lagging := s.rec.seen(judgedAt(2, 1))
		Expect(lagging).NotTo(BeEmpty(), "no state of generation 2 with the status of generation 1 was observed")
		for _, st := range lagging {
			Expect(st.effects[second].InEffect).To(BeFalse())
			Expect(st.effects[second].Message).To(ContainSubstring(
				"parent Gateway %s/public (%s): Accepted True is for generation 1, the route is at 2 (not judged yet)", s.ns, controllerName))
			Expect(st.effects[first].InEffect).To(BeFalse(), "the old split is not in effect either: the route no longer holds it")
			Expect(st.base.Weights).To(BeNil(), "no weight is known in effect while the Gateway has not judged the route")
		}
		Expect(s.rec.latest().base.Weights).To(Equal(map[string]int32{"aaaaaaaa": 50, "bbbbbbbb": 50}),
			"the controller's Traffic of no cohort reads the weights in effect")

		By("the same split again: Same as the route the API server defaulted, nothing written")
		rv := s.get().ResourceVersion
		_, wrote = s.applied(s.traffic(map[string]int32{"aaaaaaaa": 50, "bbbbbbbb": 50}))
		Expect(wrote).To(BeFalse())
		Expect(s.get().ResourceVersion).To(Equal(rv))
	})

	It("reports a cohort Service deleted as ResolvedRefs False (BackendNotFound), and in effect again once it is back", func() {
		s := newScenario("aaaaaaaa", "bbbbbbbb")
		i, _ := s.applied(s.traffic(map[string]int32{"aaaaaaaa": 90, "bbbbbbbb": 10}))
		Eventually(inEffect(s, i)).Should(BeTrue())
		since := meta.FindStatusCondition(ours(s.get(), "public").Conditions, "Accepted").LastTransitionTime

		Expect(k8s.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: cohortService("bbbbbbbb")}})).To(Succeed())
		Eventually(func() traffic.Effect { return s.rec.effect(i) }).Should(Equal(traffic.Effect{Serving: true, Message: "HTTPRoute " + s.ns +
			"/llm-frontend: parent Gateway " + s.ns + "/public (" + controllerName + "): ResolvedRefs False (BackendNotFound: " +
			"rules[0].backendRefs[1]: Service " + s.ns + "/llm-frontend-bbbbbbbb-cohort not found)"}))

		s.service("bbbbbbbb")
		Eventually(inEffect(s, i)).Should(BeTrue())
		r := s.get()
		Expect(r.Generation).To(Equal(int64(1)), "only the Service changed, never the route's spec")
		Expect(meta.FindStatusCondition(ours(r, "public").Conditions, "Accepted").LastTransitionTime).To(Equal(since),
			"Accepted stayed True: its lastTransitionTime does not move")
	})

	It("never puts a split in effect through a Gateway that does not exist, and names it", func() {
		s := newScenario("aaaaaaaa")
		i, _ := s.applied(s.traffic(map[string]int32{"aaaaaaaa": 100}, "public", "missing"))
		Eventually(func() bool { return judgedTrue(s.rec.latest().route, "public") }).Should(BeTrue(),
			"the controller accepts the route at the Gateway that exists")
		Expect(s.rec.effect(i)).To(Equal(traffic.Effect{Serving: true, Message: "HTTPRoute " + s.ns + "/llm-frontend: Gateway " + s.ns + "/missing not found",
			Unservable: "Gateway " + s.ns + "/missing (spec.rollout.trafficRouting.gatewayAPI.parentRefs[1]) not found"}),
			"serving through the Gateway that exists, and unservable as asked until the missing one is made: the controller holds the rollout")
		Expect(ours(s.rec.latest().route, "missing")).To(BeNil(), "no entry for a Gateway that does not exist")
		Expect(s.rec.seen(func(st state) bool { return st.effects[i].InEffect })).To(BeEmpty())

		By("the Gateway created: in effect through both")
		Expect(k8s.Create(ctx, gateway.Gateway(s.ns, "missing", "test", gateway.HTTPListener("http", 80, "")))).To(Succeed())
		Eventually(inEffect(s, i)).Should(BeTrue())
		Expect(s.rec.effect(i).Unservable).To(BeEmpty(), "servable once the Gateway exists")
	})

	It("detects a route under the name that the DGD does not control, and leaves it alone", func() {
		s := newScenario("aaaaaaaa")
		t := s.traffic(map[string]int32{"aaaaaaaa": 100})
		i := s.rec.ask(t)
		theirs, err := gatewayapi.Route(t) // the very split asked, but someone else's object
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Create(ctx, theirs)).To(Succeed())
		Eventually(func() bool { return judgedTrue(s.rec.latest().route, "public") }).Should(BeTrue(),
			"the Gateway accepts the route, whoever owns it")

		rv := s.rec.latest().route.ResourceVersion
		wrote, err := s.apply(t)
		Expect(err).To(MatchError(errNotControlled))
		Expect(wrote).To(BeFalse())
		got := s.get()
		Expect(got.ResourceVersion).To(Equal(rv), "the route was not written")
		Expect(gatewayapi.Controlled(got, s.dgd)).To(BeFalse())
		Expect(metav1.IsControlledBy(got, s.dgd)).To(BeFalse())
		Expect(s.rec.effect(i)).To(Equal(traffic.Effect{
			Message: "HTTPRoute " + s.ns + "/llm-frontend is not controlled by DGD llm: another object's route holds the name"}))
	})

	It("renders the route the API server stores, and Same ignores the defaults the server fills in", func() {
		s := newScenario("aaaaaaaa", "bbbbbbbb")
		t := s.traffic(map[string]int32{"aaaaaaaa": 100, "bbbbbbbb": 0})
		t.HeaderRoute = &traffic.HeaderRoute{Name: "X-Canary", Value: "1", Hash: "bbbbbbbb"}
		want, err := gatewayapi.Route(t)
		Expect(err).NotTo(HaveOccurred())
		bare := gateway.StripDefaults(want)
		Expect(bare.Spec.ParentRefs[0].Kind).To(BeNil())
		Expect(bare.Spec.Rules[1].Matches).To(BeNil())
		Expect(bare.Spec.Rules[0].BackendRefs[0].Weight).To(BeNil())
		Expect(v1alpha1.SetController(bare, s.dgd)).To(Succeed())
		i := s.rec.ask(t)
		Expect(k8s.Create(ctx, bare)).To(Succeed())

		got := s.get()
		Expect(cmp.Diff(want.Spec, got.Spec)).To(BeEmpty(), "the server filled in exactly the defaults the provider renders")
		Expect(gatewayapi.Same(got, want)).To(BeTrue())
		Expect(got.Spec.Rules[0].Matches[0].Headers).To(HaveLen(1), "the header rule is first")
		Expect(*got.Spec.Rules[1].BackendRefs[1].Weight).To(BeZero(), "a cohort at 0 keeps its backendRef")
		other, err := gatewayapi.Route(s.traffic(map[string]int32{"aaaaaaaa": 99, "bbbbbbbb": 1}))
		Expect(err).NotTo(HaveOccurred())
		Expect(gatewayapi.Same(got, other)).To(BeFalse())

		Eventually(func() *gatewayv1.HTTPRoute { return s.rec.latest().route }).ShouldNot(BeNil())
		wrote, err := s.apply(t)
		Expect(err).NotTo(HaveOccurred())
		Expect(wrote).To(BeFalse(), "a route written without defaults is Same: the operator writes nothing")
		Eventually(inEffect(s, i)).Should(BeTrue())
	})
})
