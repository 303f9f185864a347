package validation_test

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/test/harness"
)

// valid is a valid DGD; the cases below change one thing.
const valid = `
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: ok}
spec:
  services:
    Frontend:
      componentType: frontend
      extraPodSpec: {mainContainer: {image: frontend:v1}}
    worker:
      componentType: worker
      replicas: 2
      extraPodSpec: {mainContainer: {image: vllm:v1}}
`

func set(u *unstructured.Unstructured, value any, path ...string) {
	GinkgoHelper()
	Expect(unstructured.SetNestedField(u.Object, value, path...)).To(Succeed())
}

func worker(p ...string) []string { return append([]string{"spec", "services", "worker"}, p...) }

// Inputs that are wrong (the operator cannot run them as written) but that admission
// accepts. They are listed here, not in test/testdata/invalid, because the CRD does not
// reject them; the API is not changed by this suite. If the CRD starts rejecting one,
// this spec fails: move the case to test/testdata/invalid.
var _ = Describe("inputs admission accepts although they are wrong (reported, not fixed here)", func() {
	DescribeTable("accepted under strict field validation",
		func(mutate func(*unstructured.Unstructured)) {
			u := parse([]byte(valid))
			u.SetNamespace(newNamespace())
			mutate(u)
			Expect(env.Client.Create(ctx, u, client.FieldValidation("Strict"))).To(Succeed())
		},
		// Dynamo's resource shape checks cpu and memory at admission (isQuantity), not
		// the custom map (a CEL rule over it exceeds the cost budget): the operator
		// reports it as Ready=False InvalidSpec when it renders the pod template.
		Entry("a custom resource quantity that is not a quantity", func(u *unstructured.Unstructured) {
			set(u, map[string]any{"example.com/fpga": "many"}, worker("resources", "limits", "custom")...)
		}),
		// "both 0" is checked on the literal strings '0' and '0%' only.
		Entry("maxSurge 00% and maxUnavailable 0: both zero in effect", func(u *unstructured.Unstructured) {
			set(u, "00%", "spec", "rollout", "maxSurge")
			set(u, int64(0), "spec", "rollout", "maxUnavailable")
		}),
		// Labels and annotations of a service are copied to the workload and its pods,
		// where the API server rejects them: every workload create then fails.
		Entry("a service label key that is not a valid label key", func(u *unstructured.Unstructured) {
			set(u, map[string]any{"bad key!": "x"}, worker("labels")...)
		}),
		Entry("a service label value that is not a valid label value", func(u *unstructured.Unstructured) {
			set(u, map[string]any{"team": strings.Repeat("x", 64)}, worker("labels")...)
		}),
		Entry("a pod restartPolicy a Deployment cannot run (extraPodSpec.restartPolicy: Never)", func(u *unstructured.Unstructured) {
			set(u, "Never", worker("extraPodSpec", "restartPolicy")...)
		}),
		Entry("an envFromSecret that is not a Secret name", func(u *unstructured.Unstructured) {
			set(u, "Not_A_Secret", worker("envFromSecret")...)
		}),
		// README: the operator reports these as InvalidSpec (admission cannot check an
		// annotation value).
		Entry("a rolling-update annotation that is not an integer or percentage", func(u *unstructured.Unstructured) {
			set(u, map[string]any{"nvidia.com/deployment-rolling-update-max-surge": "lots"}, worker("annotations")...)
		}),
		Entry("a worker without an image", func(u *unstructured.Unstructured) {
			unstructured.RemoveNestedField(u.Object, worker("extraPodSpec")...)
		}),
	)
})

var _ = Describe("valid input", func() {
	It("accepts the samples, in Dynamo's own shape, unchanged under strict field validation", func() {
		for _, f := range []string{"disagg.yaml", "disagg-tp2.yaml", "agg.yaml", "disagg-multinode.yaml", "disagg-grove.yaml"} {
			raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "config", "samples", f))
			Expect(err).NotTo(HaveOccurred())
			u := parse(raw)
			u.SetNamespace(newNamespace())
			Expect(env.Client.Create(ctx, u, client.FieldValidation("Strict"))).To(Succeed(), f)
		}
	})

	It("accepts the canary-analysis sample patch over the disagg sample and its AnalysisTemplate, with conditions and query templates the operator takes", func() {
		ns := newNamespace()
		raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "config", "samples", "disagg.yaml"))
		Expect(err).NotTo(HaveOccurred())
		u := parse(raw)
		u.SetNamespace(ns)
		Expect(env.Client.Create(ctx, u, client.FieldValidation("Strict"))).To(Succeed())
		raw, err = os.ReadFile(filepath.Join(harness.RepoRoot(), "config", "samples", "analysis", "error-rate.yaml"))
		Expect(err).NotTo(HaveOccurred())
		tu := parse(raw)
		tu.SetNamespace(ns)
		Expect(env.Client.Create(ctx, tu, client.FieldValidation("Strict"))).To(Succeed())
		var tmpl v1alpha1.AnalysisTemplate
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tu), &tmpl)).To(Succeed())
		patch, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "config", "samples", "canary-analysis.yaml"))
		Expect(err).NotTo(HaveOccurred())
		patchJSON, err := yaml.YAMLToJSON(patch)
		Expect(err).NotTo(HaveOccurred())
		Expect(env.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, patchJSON), client.FieldValidation("Strict"))).To(Succeed())
		var d v1alpha1.DynamoGraphDeployment
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(u), &d)).To(Succeed())
		Expect(d.Spec.Rollout.Steps).To(HaveLen(4))
		templates := decide.Templates{{TemplateName: tmpl.Name}: &tmpl.Spec}
		for i, step := range d.Spec.Rollout.Steps {
			if step.Analysis == nil {
				continue
			}
			Expect(step.Analysis.Templates).To(ConsistOf(v1alpha1.AnalysisTemplateRef{TemplateName: "error-rate"}))
			metrics, err := decide.AnalysisMetrics(i, step.Analysis, ns, templates, d.WorkerServiceNames())
			Expect(err).NotTo(HaveOccurred(), "step %d", i)
			Expect(metrics).NotTo(BeEmpty())
		}
	})

	It("accepts free-text componentType and subComponentType, as Dynamo does", func() {
		u := parse([]byte(valid))
		u.SetNamespace(newNamespace())
		set(u, map[string]any{"componentType": "epp", "subComponentType": "router",
			"extraPodSpec": map[string]any{"mainContainer": map[string]any{"image": "epp:v1"}}}, "spec", "services", "epp")
		Expect(env.Client.Create(ctx, u, client.FieldValidation("Strict"))).To(Succeed())
	})
})

var _ = Describe("immutability", func() {
	It("the CRD declares its transition rules (oldSelf): spec.backend in v1alpha1; in v1beta1 also Dynamo's (type, minAvailable, restart on create)", func() {
		raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "config", "crd", "bases", "nvidia.com_dynamographdeployments.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var crd apiextensionsv1.CustomResourceDefinition
		Expect(yaml.Unmarshal(raw, &crd)).To(Succeed())
		want := map[string][]string{
			"v1alpha1": {"spec.backend is immutable"},
			"v1beta1":  {"spec.restart must be unset on create", "minAvailable is immutable", "type is immutable", "spec.backend is immutable"},
		}
		for _, v := range crd.Spec.Versions {
			var got []string
			var walk func(s *apiextensionsv1.JSONSchemaProps)
			walk = func(s *apiextensionsv1.JSONSchemaProps) {
				if s == nil {
					return
				}
				for _, r := range s.XValidations {
					if strings.Contains(r.Rule, "oldSelf") {
						got = append(got, r.Message)
					}
				}
				for _, p := range s.Properties {
					walk(&p)
				}
				if s.Items != nil {
					walk(s.Items.Schema)
				}
				if s.AdditionalProperties != nil {
					walk(s.AdditionalProperties.Schema)
				}
			}
			walk(v.Schema.OpenAPIV3Schema)
			Expect(got).To(HaveLen(len(want[v.Name])), v.Name)
			for _, m := range want[v.Name] {
				Expect(got).To(ContainElement(ContainSubstring(m)), v.Name)
			}
		}
	})

	// Everything else may change on a live DGD: a new worker template (including a
	// worker's multinode-ness, which under Auto moves it from a Deployment to a
	// LeaderWorkerSet) is a new revision rolled side by side, and the old revision's
	// workloads are drained through the backend that runs them.
	It("accepts renaming and retyping services and changing the strategy on a live DGD", func() {
		u := parse([]byte(valid))
		u.SetNamespace(newNamespace())
		Expect(env.Client.Create(ctx, u, client.FieldValidation("Strict"))).To(Succeed())
		for _, change := range []func(*unstructured.Unstructured){
			func(u *unstructured.Unstructured) {
				set(u, int64(2), "spec", "services", "worker", "multinode", "nodeCount")
			},
			func(u *unstructured.Unstructured) { set(u, "Recreate", "spec", "rollout", "strategy") },
			func(u *unstructured.Unstructured) {
				svc, _, _ := unstructured.NestedMap(u.Object, "spec", "services", "worker")
				unstructured.RemoveNestedField(u.Object, "spec", "services", "worker")
				set(u, svc, "spec", "services", "renamed")
			},
			func(u *unstructured.Unstructured) { set(u, "planner", "spec", "services", "renamed", "componentType") },
			func(u *unstructured.Unstructured) { set(u, map[string]any{}, "spec", "services") },
		} {
			Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(u), u)).To(Succeed())
			change(u)
			Expect(env.Client.Update(ctx, u, client.FieldValidation("Strict"))).To(Succeed())
		}
	})
})
