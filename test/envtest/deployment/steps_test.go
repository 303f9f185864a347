package deployment_test

import (
	"sort"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/harness"
)

// atStep is a Drive predicate: the rollout to revision 2 is at step i (0-based).
func atStep(i int32) func(harness.Snapshot) bool {
	return func(s harness.Snapshot) bool {
		ru := s.DGD.Status.RollingUpdate
		return s.DGD.Status.UpdateRevisionNumber == 2 && ru != nil && ru.CurrentStepIndex != nil && *ru.CurrentStepIndex == i
	}
}

func partitionStep(v string) v1alpha1.RolloutStep {
	p := intstr.Parse(v)
	return v1alpha1.RolloutStep{Partition: &p}
}

var _ = Describe("stepped rollouts (spec.rollout.steps)", func() {
	It("hold each partition until reached, pause for a duration, wait for a promotion, then complete", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "steps").Disagg(4, 2, "vllm:v1").Obj()
		obj.Spec.Rollout = &v1alpha1.RolloutSpec{Steps: []v1alpha1.RolloutStep{
			partitionStep("50%"),
			{Pause: &v1alpha1.RolloutPause{Duration: &metav1.Duration{Duration: 2 * time.Second}}},
			partitionStep("25%"),
			{Pause: &v1alpha1.RolloutPause{}},
		}}
		first := deploy(obj)
		Expect(first.DGD.Status.RollingUpdate.CurrentStepIndex).To(HaveValue(Equal(int32(4))), "a first deploy has nothing to canary: its steps are skipped")
		old := first.UpdateHash()
		update(ns, "steps", harness.Image("vllm:v2"))

		By("step 1 moves to 50% and, once it is reached and ready, step 2 pauses there")
		steps, err := env.Drive(ctx, ns, "steps", -1, 20, atStep(1))
		Expect(err).NotTo(HaveOccurred())
		s := steps[len(steps)-1]
		Expect(s.Pool(old)).To(Equal(map[string]int32{"prefill": 2, "decode": 1}))
		Expect(s.Pool(s.UpdateHash())).To(Equal(map[string]int32{"prefill": 2, "decode": 1}))
		Expect(s.DGD.Status.RollingUpdate.Phase).To(Equal(v1alpha1.RolloutPaused))
		Expect(s.DGD.Status.RollingUpdate.Message).To(HavePrefix("step 2/4: paused for 2s"))
		paused := s.DGD.Status.RollingUpdate.CurrentStepStartTime.Time

		By("after 2 s step 3 moves to 25%, then step 4 pauses until promoted")
		steps, err = env.Drive(ctx, ns, "steps", -1, 20, atStep(3))
		Expect(err).NotTo(HaveOccurred())
		s = steps[len(steps)-1]
		Expect(s.DGD.Status.RollingUpdate.CurrentStepStartTime.Time.Sub(paused)).To(BeNumerically(">=", 2*time.Second), "the pause lasted its duration")
		Expect(s.Pool(old)).To(Equal(map[string]int32{"prefill": 1, "decode": 1}), "25% of 4 prefill; a pool keeps a decode worker")
		Expect(s.DGD.Status.RollingUpdate.Message).To(HavePrefix("step 4/4: paused until promoted"))
		Expect(s.DGD.Status.RollingUpdate.Reason).To(Equal(v1alpha1.ReasonPaused))

		By("a promotion naming another revision does nothing; one naming step 4 completes the rollout")
		update(ns, "steps", func(d *v1alpha1.DynamoGraphDeployment) {
			metav1.SetMetaDataAnnotation(&d.ObjectMeta, v1alpha1.AnnotationPromote, "1/4")
		})
		s, err = env.WaitSettled(ctx, ns, "steps")
		Expect(err).NotTo(HaveOccurred())
		Expect(s.DGD.Status.RollingUpdate.CurrentStepIndex).To(HaveValue(Equal(int32(3))))
		update(ns, "steps", func(d *v1alpha1.DynamoGraphDeployment) {
			metav1.SetMetaDataAnnotation(&d.ObjectMeta, v1alpha1.AnnotationPromote, "2/4")
		})
		steps, err = env.Drive(ctx, ns, "steps", -1, 20, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
		s = steps[len(steps)-1]
		Expect(s.Hashes()).To(Equal([]string{s.UpdateHash()}))
		Expect(s.DGD.Status.RollingUpdate.CurrentStepIndex).To(HaveValue(Equal(int32(4))))
		Eventually(func() []string { return stepEvents(ns, "steps") }).Should(Equal([]string{
			"revision 2: step 1/4 reached partition 50%",
			"revision 2: step 2/4 paused for 2s",
			"revision 2: step 3/4 reached partition 25%",
			"revision 2: step 4/4 promoted",
		}))
	})

	It("reports a step that raises the partition as an invalid spec naming the step", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "raise").Disagg(2, 1, "vllm:v1").Obj()
		obj.Spec.Rollout = &v1alpha1.RolloutSpec{Steps: []v1alpha1.RolloutStep{partitionStep("25%"), partitionStep("50%")}}
		Expect(env.Client.Create(ctx, obj)).To(Succeed())
		Eventually(func(g Gomega) {
			d := &v1alpha1.DynamoGraphDeployment{}
			g.Expect(env.Client.Get(ctx, keyOf(ns, "raise"), d)).To(Succeed())
			c := conditionOf(d, "Ready")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1alpha1.ReasonInvalidSpec))
			g.Expect(c.Message).To(ContainSubstring("spec.rollout.steps[1].partition: 50% raises the partition of an earlier step (25%)"))
		}).Should(Succeed())
	})

	// Issue 23: queries are placeholder substitution. Admission refuses loops
	// (test/testdata/invalid/analysis-query-loop.yaml); any other Go template action is
	// an unknown placeholder, reported at the DGD's first pass and never run or sent.
	It("reports a query that is a Go template as an invalid spec naming the placeholder, and queries nothing", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "tmpl").Disagg(2, 1, "vllm:v1").Obj()
		step := errorRate(1, 0)
		step.Analysis.Metrics[0].Query = `up{ns="{{if .Name}}{{.Canary.Namespace}}{{end}}"}`
		obj.Spec.Rollout = &v1alpha1.RolloutSpec{Steps: []v1alpha1.RolloutStep{partitionStep("50%"), step}}
		Expect(env.Client.Create(ctx, obj)).To(Succeed())
		Eventually(func(g Gomega) {
			d := &v1alpha1.DynamoGraphDeployment{}
			g.Expect(env.Client.Get(ctx, keyOf(ns, "tmpl"), d)).To(Succeed())
			c := conditionOf(d, "Ready")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1alpha1.ReasonInvalidSpec))
			g.Expect(c.Message).To(ContainSubstring("spec.rollout.steps[1].analysis.metrics[0].query: not a valid query template: unknown placeholder {{if .Name}}"))
		}, 30*time.Second).Should(Succeed())
		for _, q := range env.Metrics.Queries() {
			Expect(q).NotTo(ContainSubstring(`ns="`), "a query of the invalid template was sent")
		}
	})
})

// stepEvents are the notes of the RolloutStepEnded Events on a DGD, sorted (their
// notes number the steps).
func stepEvents(ns, dgd string) []string {
	var evs eventsv1.EventList
	Expect(env.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range evs.Items {
		if e.Regarding.Name == dgd && e.Reason == v1alpha1.EventRolloutStepEnded {
			out = append(out, e.Note)
		}
	}
	sort.Strings(out)
	return out
}

func keyOf(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

func conditionOf(d *v1alpha1.DynamoGraphDeployment, condition string) *metav1.Condition {
	return apimeta.FindStatusCondition(d.Status.Conditions, condition)
}
