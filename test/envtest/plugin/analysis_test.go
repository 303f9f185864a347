package plugin_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/cmd/kubectl-dgd/app"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/test/prom"
)

var _ = Describe("analysis run", func() {
	It("measures a template once as the operator's step renders it: the same queries, judged, and its InvalidSpec messages", func() {
		const ns, name, latency = "analysis-run", "tmpl", "analysis-run-latency"
		Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())

		By("the sample AnalysisTemplate, and a ClusterAnalysisTemplate comparing the canary with the stable")
		raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "config", "samples", "analysis", "error-rate.yaml"))
		Expect(err).NotTo(HaveOccurred())
		tmpl := &v1alpha1.AnalysisTemplate{}
		Expect(yaml.UnmarshalStrict(raw, tmpl)).To(Succeed())
		tmpl.Namespace = ns
		Expect(env.Client.Create(ctx, tmpl)).To(Succeed())
		cluster := &v1alpha1.ClusterAnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Name: latency}, Spec: v1alpha1.AnalysisTemplateSpec{
			Metrics: []v1alpha1.AnalysisMetric{{Name: "ttft-vs-stable",
				Query:            `max(vllm:ttft{dynamo_namespace="{{.Canary.Namespace}}"}) / max(vllm:ttft{dynamo_namespace="{{.Stable.Namespace}}"})`,
				SuccessCondition: "result <= 1.2"}}}}
		Expect(env.Client.Create(ctx, cluster)).To(Succeed())
		DeferCleanup(func() { Expect(env.Client.Delete(ctx, cluster)).To(Succeed()) })

		By("a DGD whose analysis step references both, at that step of revision 2: the operator measures")
		half := intstr.FromString("50%")
		obj := harness.NewDGD(ns, name).Disagg(2, 2, "vllm:v1").Obj()
		obj.Spec.Rollout = &v1alpha1.RolloutSpec{Steps: []v1alpha1.RolloutStep{{Partition: &half}, {Analysis: &v1alpha1.RolloutAnalysis{
			Templates: []v1alpha1.AnalysisTemplateRef{{TemplateName: "error-rate"}, {TemplateName: latency, ClusterScope: true}},
			Args:      []v1alpha1.AnalysisArgument{{Name: "max-error-rate", Value: ptr.To("0.05")}}}}}}
		deploy(obj)
		stableHash := getDGD(ns, name).Status.UpdateWorkerHash
		env.Metrics.Answer(func(string) analysis.Result { return harness.Value(0.01) })
		DeferCleanup(func() { env.Metrics.Answer(nil) })
		change(ns, name, func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
		_, err = env.Drive(ctx, ns, name, -1, 20, atStep(2, 1))
		Expect(err).NotTo(HaveOccurred())
		canaryHash := getDGD(ns, name).Status.UpdateWorkerHash
		Expect(canaryHash).NotTo(Equal(stableHash))
		// As --help tells a user to write them: <namespace>-<dgd>-<hash>.
		canary, stable := fmt.Sprintf("%s-%s-%s", ns, name, canaryHash), fmt.Sprintf("%s-%s-%s", ns, name, stableHash)
		operator := func() []string { return env.Metrics.Queries() }
		Eventually(operator).Should(ContainElement(ContainSubstring("vllm:ttft")), "the cluster template's metric has no initial delay")
		Eventually(operator, "15s").Should(ContainElement(ContainSubstring("errors_total")), "the sample's metric, after its 5 s initial delay")

		By("kubectl dgd analysis run, against a fake Prometheus named by DGD_PROMETHEUS_URL")
		fake := prom.StartFake(func(q string) prom.Answer {
			switch {
			case strings.Contains(q, "errors_total"):
				return prom.Answer{Values: []float64{0.01}}
			case strings.Contains(q, "vllm:ttft"):
				return prom.Answer{Values: []float64{1.1}}
			}
			return prom.Answer{}
		})
		DeferCleanup(fake.Close)
		Expect(os.Setenv(app.PrometheusURLEnv, fake.URL)).To(Succeed())
		DeferCleanup(func() { Expect(os.Unsetenv(app.PrometheusURLEnv)).To(Succeed()) })
		t := &transcript{ns: ns}
		t.must("analysis", "run", "error-rate", "--canary-namespace="+canary, "--arg", "max-error-rate=0.05")
		t.must("analysis", "run", latency, "--cluster-scope", "--canary-namespace="+canary, "--stable-namespace="+stable)
		Expect(fake.Queries()).To(HaveLen(2), "one query per metric")
		for _, q := range fake.Queries() {
			Expect(operator()).To(ContainElement(q), "the operator's step sent the same query")
		}

		By("a failed metric, a missing argument, a missing template: non-zero, the operator's InvalidSpec messages")
		t.fails("analysis", "run", "error-rate", "--canary-namespace="+canary, "--arg", "max-error-rate=0.005")
		t.fails("analysis", "run", "error-rate", "--canary-namespace="+canary)
		t.fails("analysis", "run", "nope", "--canary-namespace="+canary)
		Expect(t.String()).To(ContainSubstring(`spec.rollout.steps[0].analysis.templates[0]: AnalysisTemplate "nope" not found in namespace analysis-run`))
		Expect(fake.Queries()).To(HaveLen(3), "nothing is queried for an invalid spec")
		expectGolden("analysis-run", strings.NewReplacer(canaryHash, "<canary-hash>", stableHash, "<stable-hash>").Replace(t.String()))

		By("shell completion offers the namespace's templates, or with --cluster-scope the cluster's")
		Expect(complete(ns, "analysis", "run")).To(Equal([]string{"error-rate"}))
		Expect(complete(ns, "analysis", "run", "--cluster-scope")).To(ContainElement(latency))
		Expect(complete(ns, "analysis", "run", "--cluster-scope")).NotTo(ContainElement("error-rate"))
	})
})
