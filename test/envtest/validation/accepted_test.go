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
		Entry("a pod restartPolicy a Deployment cannot run (extraPodSpec.restartPolicy: Never)", func(u *unstructured.Unstructured) {
			set(u, "Never", worker("extraPodSpec", "restartPolicy")...)
		}),
		// What the API server refuses of a pod template that admission does not check
		// (docs/reference.md, "Strings the operator writes"): cross-references and
		// uniqueness inside a PodSpec's lists, and a sum over a map, each a CEL rule
		// over lists or maps without a bound, past the CRD's cost budget. The first
		// write is refused (WriteRefused, naming the object and quoting the API server).
		Entry("a volume mount naming no volume of the pod", func(u *unstructured.Unstructured) {
			set(u, []any{map[string]any{"name": "cache", "mountPath": "/cache"}}, worker("extraPodSpec", "mainContainer", "volumeMounts")...)
		}),
		Entry("two ports of one container with one name", func(u *unstructured.Unstructured) {
			set(u, []any{map[string]any{"name": "http", "containerPort": int64(8000)}, map[string]any{"name": "http", "containerPort": int64(8001)}},
				worker("extraPodSpec", "mainContainer", "ports")...)
		}),
		// (In extraPodMetadata: a v1alpha1 service's own annotations have no v1beta1
		// field and are kept in the DGD's nvidia.com/dgd-spec annotation, which the API
		// server already refuses past 256 KiB when it converts the DGD for storage.)
		Entry("a pod's annotations past 256 KiB in all (each value within it)", func(u *unstructured.Unstructured) {
			set(u, map[string]any{"a": strings.Repeat("x", 200*1024), "b": strings.Repeat("x", 200*1024)}, worker("extraPodMetadata", "annotations")...)
		}),
		Entry("a container resource name that is no resource name in mainContainer.resources", func(u *unstructured.Unstructured) {
			set(u, map[string]any{"fpga": "1"}, worker("extraPodSpec", "mainContainer", "resources", "limits")...)
		}),
		Entry("an extended resource requested without its limit (gpu in requests only)", func(u *unstructured.Unstructured) {
			set(u, map[string]any{"gpu": "1"}, worker("resources", "requests")...)
		}),
		// docs/api.md, Validation: the operator reports these as InvalidSpec (admission
		// cannot check an annotation value).
		Entry("a rolling-update annotation that is not an integer or percentage", func(u *unstructured.Unstructured) {
			set(u, map[string]any{"nvidia.com/deployment-rolling-update-max-surge": "lots"}, worker("annotations")...)
		}),
		Entry("a worker without an image", func(u *unstructured.Unstructured) {
			unstructured.RemoveNestedField(u.Object, worker("extraPodSpec")...)
		}),
	)
})

// Strings the API server takes where the operator writes them, although they look
// wrong: admission takes them too (it never refuses what the first write would take,
// nor what Dynamo's operator deploys).
var _ = Describe("strings the API server takes", func() {
	DescribeTable("accepted under strict field validation",
		func(mutate func(*unstructured.Unstructured)) {
			u := parse([]byte(valid))
			u.SetNamespace(newNamespace())
			mutate(u)
			Expect(env.Client.Create(ctx, u, client.FieldValidation("Strict"))).To(Succeed())
		},
		// validateSecretEnvSource checks an envFrom Secret as a name prefix
		// (NameIsDNSSubdomain(name, true)): a trailing '-' passes.
		Entry("an envFromSecret ending in '-'", func(u *unstructured.Unstructured) {
			set(u, "hf-token-", worker("envFromSecret")...)
		}),
		Entry("an envFrom ConfigMap ending in '_-' (the API server masks its last two characters)", func(u *unstructured.Unstructured) {
			set(u, []any{map[string]any{"configMapRef": map[string]any{"name": "cfg_-"}}}, worker("extraPodSpec", "mainContainer", "envFrom")...)
		}),
		// Kubernetes v1.36's env var names: any printable ASCII but '='.
		Entry("env var names with dots, spaces and dashes", func(u *unstructured.Unstructured) {
			set(u, []any{map[string]any{"name": "my.var 1-x", "value": "1"}}, worker("envs")...)
			set(u, []any{map[string]any{"name": "9LIVES", "value": "1"}}, "spec", "envs")
		}),
		// ValidateAnnotations checks a key in lower case.
		Entry("an annotation key with an upper-case prefix", func(u *unstructured.Unstructured) {
			set(u, map[string]any{"Example.COM/Key": "v"}, worker("annotations")...)
		}),
		Entry("an empty label value", func(u *unstructured.Unstructured) {
			set(u, map[string]any{"example.com/flag": ""}, worker("labels")...)
		}),
		// The operator names the main container "main" whatever the manifest says.
		Entry("a mainContainer name that is no container name", func(u *unstructured.Unstructured) {
			set(u, "Main_Container", worker("extraPodSpec", "mainContainer", "name")...)
		}),
		Entry("an unnamed port", func(u *unstructured.Unstructured) {
			set(u, []any{map[string]any{"containerPort": int64(9090)}}, worker("extraPodSpec", "mainContainer", "ports")...)
		}),
		Entry("a probe on a port number", func(u *unstructured.Unstructured) {
			set(u, map[string]any{"httpGet": map[string]any{"path": "/health", "port": int64(9090)}}, worker("readinessProbe")...)
		}),
		// Dynamo keeps a disabled Ingress as given, and so does admission.
		Entry("a disabled Ingress with a class, TLS Secret and labels no Ingress takes", func(u *unstructured.Unstructured) {
			set(u, map[string]any{"enabled": false, "host": "x", "ingressControllerClassName": "Nginx_Class",
				"tls": map[string]any{"secretName": "My_TLS"}, "labels": map[string]any{"a/b/c": "x y"}, "annotations": map[string]any{"bad key": "x"}},
				"spec", "services", "Frontend", "ingress")
		}),
		// Only what is rendered is checked: gpuType without gpu, a custom key without a
		// value.
		Entry("a gpuType without gpu, a custom resource without a quantity", func(u *unstructured.Unstructured) {
			set(u, map[string]any{"gpuType": "h100", "custom": map[string]any{"fpga": ""}}, worker("resources", "limits")...)
		}),
		Entry("container resource names of every kind the API server takes", func(u *unstructured.Unstructured) {
			set(u, map[string]any{"gpu": "1", "gpuType": "nvidia.com/mig-1g.10gb",
				"custom": map[string]any{"hugepages-2Mi": "1Gi", "ephemeral-storage": "1Gi", "example.com/fpga": "1", "kubernetes.io/x": "1"}},
				worker("resources", "limits")...)
		}),
		Entry("two parentRefs to one Gateway on different listeners, and one to another", func(u *unstructured.Unstructured) {
			set(u, map[string]any{"gatewayAPI": map[string]any{"parentRefs": []any{
				map[string]any{"name": "gw", "sectionName": "http"}, map[string]any{"name": "gw", "sectionName": "https"},
				map[string]any{"name": "other"}}}}, "spec", "rollout", "trafficRouting")
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
