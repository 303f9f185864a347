package deployment_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/test/harness"
)

// invalidSpecSays waits until the DGD's Ready condition is InvalidSpec with msg.
func invalidSpecSays(ns, name, msg string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		d := &v1alpha1.DynamoGraphDeployment{}
		g.Expect(env.Client.Get(ctx, keyOf(ns, name), d)).To(Succeed())
		c := conditionOf(d, "Ready")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(v1alpha1.ReasonInvalidSpec))
		g.Expect(c.Message).To(ContainSubstring(msg))
	}, 30*time.Second).Should(Succeed())
}

var _ = Describe("analysis templates", func() {
	It("run a step's AnalysisTemplate with its args, and re-run the pass when the template changes", func() {
		ns := newNamespace()
		tmpl := &v1alpha1.AnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "errors"}, Spec: v1alpha1.AnalysisTemplateSpec{
			Args: []v1alpha1.AnalysisArgument{{Name: "metric"}, {Name: "max", Value: ptr.To("0.05")}},
			Metrics: []v1alpha1.AnalysisMetric{{Name: "errors", Query: `{{args.metric}}{dynamo_namespace="{{.Canary.MetricsNamespace}}"}`,
				SuccessCondition: "result < {{args.max}}", Interval: &metav1.Duration{Duration: time.Second}, Count: ptr.To[int32](2)}},
		}}
		Expect(env.Client.Create(ctx, tmpl)).To(Succeed())
		step := v1alpha1.RolloutStep{Analysis: &v1alpha1.RolloutAnalysis{
			Templates: []v1alpha1.AnalysisTemplateRef{{TemplateName: "errors"}},
			Args:      []v1alpha1.AnalysisArgument{{Name: "metric", Value: ptr.To("error_ratio")}}}}
		deployCanary(ns, "tmpl", step)
		env.Metrics.Answer(func(string) analysis.Result { return harness.Value(0.01) })
		update(ns, "tmpl", harness.Image("vllm:v2"))

		steps, err := env.Drive(ctx, ns, "tmpl", -1, 30, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
		s := steps[len(steps)-1]
		run := s.DGD.Status.RollingUpdate.Analyses
		Expect(run).To(HaveLen(1))
		Expect(run[0].Phase).To(Equal(v1alpha1.AnalysisSuccessful))
		Expect(run[0].Metrics).To(ConsistOf(HaveField("Name", "errors")))
		Expect(run[0].Metrics[0].Successful).To(Equal(int32(2)))
		By("the query carries the step's argument and the canary's namespace")
		canary := strings.ReplaceAll(fmt.Sprintf("%s-tmpl-%s", ns, s.UpdateHash()), "-", "_")
		Expect(env.Metrics.Queries()).To(ContainElement(fmt.Sprintf(`error_ratio{dynamo_namespace=%q}`, canary)))

		By("an edit of the template re-runs the settled DGD's pass: an argument the step does not pass is named")
		Expect(env.Client.Get(ctx, keyOf(ns, "errors"), tmpl)).To(Succeed())
		tmpl.Spec.Args[0].Name = "series"
		tmpl.Spec.Metrics[0].Query = `{{args.series}}{dynamo_namespace="{{.Canary.MetricsNamespace}}"}`
		Expect(env.Client.Update(ctx, tmpl)).To(Succeed())
		invalidSpecSays(ns, "tmpl", `spec.rollout.steps[1].analysis.args: AnalysisTemplate "errors" needs a value for argument "series"`)

		By("deleting the template names it; creating a ClusterAnalysisTemplate does not stand in for it")
		Expect(env.Client.Delete(ctx, tmpl)).To(Succeed())
		invalidSpecSays(ns, "tmpl", `spec.rollout.steps[1].analysis.templates[0]: AnalysisTemplate "errors" not found in namespace `+ns)

		By("the DGD that references it as a ClusterAnalysisTemplate goes on once it exists")
		cluster := &v1alpha1.ClusterAnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Name: "errors-" + ns}, Spec: tmpl.Spec}
		cluster.Spec.Args = append(cluster.Spec.Args[:0:0], v1alpha1.AnalysisArgument{Name: "series", Value: ptr.To("error_ratio")}, tmpl.Spec.Args[1])
		update(ns, "tmpl", func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Rollout.Steps[1].Analysis.Templates = []v1alpha1.AnalysisTemplateRef{{TemplateName: cluster.Name, ClusterScope: true}}
		})
		invalidSpecSays(ns, "tmpl", fmt.Sprintf(`ClusterAnalysisTemplate %q not found in the cluster`, cluster.Name))
		Expect(env.Client.Create(ctx, cluster)).To(Succeed())
		DeferCleanup(func() { Expect(env.Client.Delete(ctx, cluster)).To(Succeed()) })
		Eventually(func(g Gomega) {
			d := &v1alpha1.DynamoGraphDeployment{}
			g.Expect(env.Client.Get(ctx, keyOf(ns, "tmpl"), d)).To(Succeed())
			g.Expect(conditionOf(d, "Ready").Reason).NotTo(Equal(v1alpha1.ReasonInvalidSpec))
		}, 30*time.Second).Should(Succeed())
	})
})
