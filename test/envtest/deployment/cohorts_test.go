package deployment_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/test/gateway"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/traffic/proxy"
)

// dynamoUpgrade bumps the frontend's and every worker's image in one edit: a Dynamo
// upgrade, which spec.rollout.frontends Auto (the default) runs as cohorts.
func dynamoUpgrade(tag string) func(*v1alpha1.DynamoGraphDeployment) {
	return func(d *v1alpha1.DynamoGraphDeployment) {
		harness.SetImage(d, "vllm:"+tag)
		d.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.7." + tag
	}
}

// frontendEnv is the main container's env of a Deployment, by name.
func frontendEnv(s harness.Snapshot, name string) map[string]string {
	for _, d := range s.All {
		if d.Name == name {
			env := map[string]string{}
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
			return env
		}
	}
	return nil
}

var _ = Describe("cohorts", func() {
	It("runs a Dynamo upgrade (frontend and workers together) as cohorts through the proxy: each revision's frontend discovers only its namespace, the old cohort goes last", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "up").Disagg(4, 2, "vllm:v1").Obj()
		first := deploy(obj)
		oldHash := first.Hashes()[0]
		Expect(first.Stable).To(HaveLen(1), "a shared frontend until the first Dynamo upgrade (Auto)")
		update(ns, obj.Name, dynamoUpgrade("1"))
		steps, err := env.Drive(ctx, ns, obj.Name, 1, 80, func(s harness.Snapshot) bool {
			return s.Completed() && s.DGD.Status.UpdateRevisionNumber == 2 && len(s.Hashes()) == 1
		})
		Expect(err).NotTo(HaveOccurred())
		last := steps[len(steps)-1]
		newHash := last.Hashes()[0]
		Expect(newHash).NotTo(Equal(oldHash))

		By("every state: a cohort frontend discovers exactly its revision's namespace, and no shared frontend runs beside two revisions")
		for i, s := range steps {
			revs := map[string]bool{}
			for _, w := range s.Workloads {
				if w.Service != "Frontend" && w.Spec > 0 {
					revs[w.Hash] = true
				}
			}
			for _, d := range s.All {
				if d.Labels[v1alpha1.LabelService] != "Frontend" || d.Labels[v1alpha1.LabelTrafficProxy] != "" {
					continue
				}
				env := frontendEnv(s, d.Name)
				h := d.Labels[v1alpha1.LabelWorkerHash]
				if h == "" {
					Expect(len(revs)).To(BeNumerically("<=", 1), "step %d: the shared frontend %s beside revisions %v", i, d.Name, revs)
					continue
				}
				Expect(env[v1alpha1.EnvDynNamespace]).To(Equal(fmt.Sprintf("%s-up-%s", ns, h)), "step %d: %s", i, d.Name)
				Expect(env).NotTo(HaveKey(v1alpha1.EnvDynNamespacePrefix), "step %d: %s", i, d.Name)
			}
		}

		By("the end: the new revision's frontend and workers alone, the entry Service selecting the proxy")
		Expect(last.Stable).To(BeEmpty(), "no shared frontend in cohort form")
		var names []string
		for _, d := range last.All {
			if d.Labels[v1alpha1.LabelTrafficProxy] == "" {
				names = append(names, d.Name)
			}
		}
		Expect(names).To(ConsistOf("up-frontend-"+newHash, "up-decode-"+newHash, "up-prefill-"+newHash))
		Expect(last.Proxies).To(HaveLen(1))
		var entry corev1.Service
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "up-frontend"}, &entry)).To(Succeed())
		Expect(entry.Spec.Selector).To(HaveKeyWithValue(proxy.LabelProxy, "true"))
		var cohort corev1.Service
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: backends.CohortServiceName("up", "Frontend", newHash)}, &cohort)).To(Succeed())
		Expect(cohort.Spec.ClusterIP).NotTo(Equal(corev1.ClusterIPNone))
		Expect(cohort.Spec.Selector).To(HaveKeyWithValue(v1alpha1.LabelWorkerHash, newHash))
		st := last.DGD.Status
		Expect(st.Traffic).NotTo(BeNil())
		Expect(st.Traffic.Provider).To(Equal(v1alpha1.TrafficProxy))
		Expect(st.Cohorts).To(HaveLen(1))
		Expect(st.Cohorts[0].Hash).To(Equal(newHash))
		Expect(st.Cohorts[0].Weight).To(Equal(int32(100)))
		Expect(st.Cohorts[0].WeightInEffect).To(Equal(ptr.To(int32(100))))

		By("the traffic moved while both cohorts ran, and never to a cohort that could not serve")
		shared := 0
		for _, s := range steps {
			for _, c := range s.DGD.Status.Cohorts {
				if c.Weight > 0 {
					Expect(c.Routable).To(BeTrue(), "revision %d weighted %d%% while not routable", c.Revision, c.Weight)
				}
			}
			if len(s.DGD.Status.Cohorts) == 2 && s.DGD.Status.Cohorts[0].Weight > 0 && s.DGD.Status.Cohorts[1].Weight > 0 {
				shared++
			}
		}
		Expect(shared).To(BeNumerically(">", 0), "no state split the traffic between the two cohorts")
	})
})

// weightsOf is status.cohorts' weights asked and in effect, by revision.
func weightsOf(s harness.Snapshot) map[int64][2]int32 {
	out := map[int64][2]int32{}
	for _, c := range s.DGD.Status.Cohorts {
		in := int32(-1)
		if c.WeightInEffect != nil {
			in = *c.WeightInEffect
		}
		out[c.Revision] = [2]int32{c.Weight, in}
	}
	return out
}

var _ = Describe("a canary of cohorts", func() {
	It("holds setWeight 25 and 50 with a header route, aborts to 100% on the stable cohort first, retries and completes", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "can").Disagg(4, 4, "vllm:v1").Obj()
		obj.Spec.Rollout = &v1alpha1.RolloutSpec{Frontends: v1alpha1.FrontendsPerRevision}
		deploy(obj)
		update(ns, obj.Name, func(d *v1alpha1.DynamoGraphDeployment) {
			dynamoUpgrade("2")(d)
			d.Spec.Rollout.Steps = []v1alpha1.RolloutStep{{SetWeight: ptr.To(int32(25))},
				{SetHeaderRoute: &v1alpha1.HeaderRoute{Name: "X-Dynamo-Canary", Value: "yes"}},
				{SetWeight: ptr.To(int32(50))}, {Pause: &v1alpha1.RolloutPause{}}}
		})
		atPause := func(s harness.Snapshot) bool {
			ru := s.DGD.Status.RollingUpdate
			return ru != nil && ru.CurrentStepKind == v1alpha1.StepPause && s.DGD.Status.Traffic != nil && s.DGD.Status.Traffic.InEffect
		}
		steps, err := env.Drive(ctx, ns, obj.Name, 1, 80, atPause)
		Expect(err).NotTo(HaveOccurred())

		By("every state: the weight asked never exceeds the step's, and the step ends only once its weight is in effect")
		sawQuarter := false
		for _, s := range steps {
			w := weightsOf(s)
			ru := s.DGD.Status.RollingUpdate
			if ru.CurrentStepIndex != nil && *ru.CurrentStepIndex == 1 { // the header route's step: setWeight 25 ended
				Expect(w[2]).To(Equal([2]int32{25, 25}), "step 2 reached before 25%% was in effect: %v", w)
				sawQuarter = true
			}
			Expect(w[2][0]).To(BeNumerically("<=", 50))
		}
		_ = sawQuarter // a state at step 2 is seen only when a settle lands between the two steps
		Eventually(func() []string { return eventsOf(ns, obj.Name, v1alpha1.EventRolloutStepEnded) }).Should(ContainElements(
			"Normal: revision 2: step 1/4 set weight 25%", "Normal: revision 2: step 2/4 routed header X-Dynamo-Canary to the new revision",
			"Normal: revision 2: step 3/4 set weight 50%"))
		held := steps[len(steps)-1]
		Expect(weightsOf(held)).To(Equal(map[int64][2]int32{1: {50, 50}, 2: {50, 50}}))
		canary := held.DGD.Status.Cohorts[0]
		Expect(canary.Revision).To(Equal(int64(2)))
		Expect(canary.HeaderRoute).To(BeTrue())

		By("the abort: 100% on the stable cohort, in effect, before the canary's workers go")
		update(ns, obj.Name, func(d *v1alpha1.DynamoGraphDeployment) {
			metav1SetAnnotation(d, v1alpha1.AnnotationAbort, "2/1")
		})
		steps, err = env.Drive(ctx, ns, obj.Name, 1, 60, func(s harness.Snapshot) bool {
			return harness.PhaseIs(v1alpha1.RolloutAborted, v1alpha1.ReasonRolloutAborted)(s) && s.DGD.Status.RollingUpdate.EndTime != nil && len(s.Hashes()) == 1
		})
		Expect(err).NotTo(HaveOccurred())
		stableFirst := false
		for _, s := range steps {
			w := weightsOf(s)
			if w[1] == [2]int32{100, 100} && s.PoolSize(held.UpdateHash()) > 0 {
				stableFirst = true
			}
			if s.PoolSize(held.UpdateHash()) < held.PoolSize(held.UpdateHash()) {
				Expect(w[2][1]).To(BeNumerically("<=", 0), "the canary's workers went while its weight in effect was %d", w[2][1])
			}
		}
		Expect(stableFirst).To(BeTrue(), "no state had the stable cohort at 100% in effect with the canary still there")

		By("the retry runs the steps again, and a full promotion completes the rollout")
		update(ns, obj.Name, func(d *v1alpha1.DynamoGraphDeployment) {
			metav1SetAnnotation(d, v1alpha1.AnnotationRetry, "2/1")
		})
		_, err = env.Drive(ctx, ns, obj.Name, -1, 60, atPause)
		Expect(err).NotTo(HaveOccurred())
		update(ns, obj.Name, func(d *v1alpha1.DynamoGraphDeployment) {
			metav1SetAnnotation(d, v1alpha1.AnnotationPromote, "2/full")
		})
		steps, err = env.Drive(ctx, ns, obj.Name, -1, 60, func(s harness.Snapshot) bool { return s.Completed() && len(s.Hashes()) == 1 })
		Expect(err).NotTo(HaveOccurred())
		last := steps[len(steps)-1]
		Expect(last.DGD.Status.RollingUpdate.Attempt).To(Equal(int32(2)))
		Expect(weightsOf(last)).To(Equal(map[int64][2]int32{2: {100, 100}}))
	})
})

func metav1SetAnnotation(d *v1alpha1.DynamoGraphDeployment, key, value string) {
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[key] = value
}

// throughGateway routes the cohorts through an HTTPRoute attached to Gateway gw (of the
// DGD's namespace), cohorts dropped 1 s after their weight 0 is in effect.
func throughGateway(gw string) func(*v1alpha1.DynamoGraphDeployment) {
	return func(d *v1alpha1.DynamoGraphDeployment) {
		if d.Spec.Rollout == nil {
			d.Spec.Rollout = &v1alpha1.RolloutSpec{}
		}
		d.Spec.Rollout.TrafficRouting = &v1alpha1.TrafficRouting{GatewayAPI: &v1alpha1.GatewayAPIRouting{
			ParentRefs: []gatewayv1.ParentReference{{Name: gatewayv1.ObjectName(gw)}}, DrainSeconds: ptr.To(int32(1))}}
	}
}

var _ = Describe("cohorts through a Gateway API HTTPRoute", func() {
	It("weights one backendRef per cohort, in effect once the Gateway accepted the route's generation, and removes a cohort after", func() {
		ns := newNamespace()
		Expect(env.Client.Create(ctx, gateway.Gateway(ns, "gw", gatewayClass, gateway.HTTPListener("http", 80, "")))).To(Succeed())
		obj := harness.NewDGD(ns, "gwr").Disagg(2, 2, "vllm:v1").Obj()
		obj.Spec.Rollout = &v1alpha1.RolloutSpec{Frontends: v1alpha1.FrontendsPerRevision}
		throughGateway("gw")(obj)
		first := deploy(obj)
		Expect(first.DGD.Status.Traffic).NotTo(BeNil())
		Expect(first.DGD.Status.Traffic.Provider).To(Equal(v1alpha1.TrafficGatewayAPI))
		update(ns, obj.Name, dynamoUpgrade("3"))
		steps, err := env.Drive(ctx, ns, obj.Name, 1, 80, func(s harness.Snapshot) bool {
			return s.Completed() && s.DGD.Status.UpdateRevisionNumber == 2 && len(s.Hashes()) == 1
		})
		Expect(err).NotTo(HaveOccurred())
		newHash := steps[len(steps)-1].Hashes()[0]
		var route gatewayv1.HTTPRoute
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gwr-frontend"}, &route)).To(Succeed())
		Expect(route.Spec.Rules).NotTo(BeEmpty())
		refs := route.Spec.Rules[len(route.Spec.Rules)-1].BackendRefs
		Expect(refs).To(HaveLen(1))
		Expect(string(refs[0].Name)).To(Equal(backends.CohortServiceName("gwr", "Frontend", newHash)))
		Expect(refs[0].Weight).To(Equal(ptr.To(int32(100))))
		for _, s := range steps {
			for _, c := range s.DGD.Status.Cohorts {
				if c.Weight > 0 {
					Expect(c.Routable).To(BeTrue(), "revision %d weighted %d%% while not routable", c.Revision, c.Weight)
				}
			}
		}
	})

	It("shows a parentRef to a Gateway that does not exist on the DGD within one pass, and touches nothing that runs", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "nogw").Disagg(2, 2, "vllm:v1").Obj()
		first := deploy(obj)
		update(ns, obj.Name, func(d *v1alpha1.DynamoGraphDeployment) {
			frontends(v1alpha1.FrontendsPerRevision)(d)
			throughGateway("missing")(d)
			dynamoUpgrade("4")(d)
		})
		missing := "Gateway " + ns + "/missing (spec.rollout.trafficRouting.gatewayAPI.parentRefs[0]) not found"
		var s harness.Snapshot
		Eventually(func(g Gomega) {
			_, err := env.Play(ctx, ns, obj.Name, -1) // the pods of what runs are ready at once
			g.Expect(err).NotTo(HaveOccurred())
			s, err = env.Take(ctx, ns, obj.Name)
			g.Expect(err).NotTo(HaveOccurred())
			c := conditionOf(&s.DGD, v1alpha1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1alpha1.ReasonTrafficNotServing))
			g.Expect(c.Message).To(ContainSubstring(missing))
		}).Should(Succeed())
		Eventually(func() []string { return eventsOf(ns, obj.Name, v1alpha1.ReasonTrafficNotServing) }).Should(ContainElement(ContainSubstring(missing)))
		By("the workers of the running revision are untouched, the shared frontend kept, and the new revision gets none")
		for range 3 {
			_, err := env.Play(ctx, ns, obj.Name, -1)
			Expect(err).NotTo(HaveOccurred())
			now, err := env.Take(ctx, ns, obj.Name)
			Expect(err).NotTo(HaveOccurred())
			Expect(now.Pool(first.Hashes()[0])).To(Equal(first.Pool(first.Hashes()[0])), "no cohort frontend made, no worker moved")
			Expect(now.Hashes()).To(Equal(first.Hashes()))
		}
	})
})

func frontends(mode v1alpha1.FrontendMode) func(*v1alpha1.DynamoGraphDeployment) {
	return func(d *v1alpha1.DynamoGraphDeployment) {
		if d.Spec.Rollout == nil {
			d.Spec.Rollout = &v1alpha1.RolloutSpec{}
		}
		d.Spec.Rollout.Frontends = mode
	}
}
