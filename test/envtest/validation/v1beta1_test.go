package validation_test

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/test/harness"
)

// v1beta1: Dynamo's current API. Its samples and Dynamo's own example graphs are
// accepted under strict field validation; what Dynamo's v1beta1 schema refuses on update
// is refused naming the field; what it refuses in its webhook but this operator rolls
// safely is accepted (DYNAMO-V1BETA1.md §6; api/v1beta1 doc).
var _ = Describe("v1beta1", func() {
	read := func(path ...string) *unstructured.Unstructured {
		raw, err := os.ReadFile(filepath.Join(append([]string{harness.RepoRoot()}, path...)...))
		Expect(err).NotTo(HaveOccurred())
		u := parse(raw)
		Expect(u.GetAPIVersion()).To(Equal("nvidia.com/v1beta1"), filepath.Join(path...))
		u.SetNamespace(newNamespace())
		return u
	}
	files := func(dir ...string) []string {
		out, err := filepath.Glob(filepath.Join(append(append([]string{harness.RepoRoot()}, dir...), "*.yaml")...))
		Expect(err).NotTo(HaveOccurred())
		return out
	}
	components := func(u *unstructured.Unstructured) []any {
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "components")
		return cs
	}
	setComponents := func(u *unstructured.Unstructured, cs []any) {
		Expect(unstructured.SetNestedSlice(u.Object, cs, "spec", "components")).To(Succeed())
	}

	It("accepts every v1beta1 sample and Dynamo's example graphs (aggregated, disaggregated, multinode vLLM / SGLang / TRT-LLM) under strict field validation", func() {
		paths := append(files("config", "samples", "v1beta1"), files("test", "testdata", "dynamo")...)
		n := 0
		for _, p := range paths {
			rel, _ := filepath.Rel(harness.RepoRoot(), p)
			if filepath.Base(p) == "canary-analysis.yaml" {
				continue // a patch, applied in the v1alpha1 spec above (spelled alike)
			}
			Expect(env.Client.Create(ctx, read(rel), client.FieldValidation("Strict"))).To(Succeed(), rel)
			n++
		}
		Expect(n).To(BeNumerically(">=", 10))
	})

	It("refuses changing a component's type, naming it (Dynamo's schema rule)", func() {
		u := read("test", "testdata", "dynamo", "vllm-disagg.yaml")
		Expect(env.Client.Create(ctx, u)).To(Succeed())
		cs := components(u)
		cs[1].(map[string]any)["type"] = "worker"
		setComponents(u, cs)
		err := env.Client.Update(ctx, u)
		Expect(err).To(MatchError(And(ContainSubstring("spec.components[1].type"), ContainSubstring("type is immutable"))))
	})

	It("refuses changing minAvailable, naming it, and a restart on create", func() {
		u := read("test", "testdata", "dynamo", "vllm-agg.yaml")
		cs := components(u)
		cs[1].(map[string]any)["minAvailable"] = int64(1)
		setComponents(u, cs)
		r := u.DeepCopy()
		Expect(unstructured.SetNestedField(r.Object, map[string]any{"id": "1"}, "spec", "restart")).To(Succeed())
		Expect(env.Client.Create(ctx, r)).To(MatchError(ContainSubstring("spec.restart must be unset on create")))
		Expect(env.Client.Create(ctx, u)).To(Succeed())
		cs = components(u)
		cs[1].(map[string]any)["minAvailable"] = int64(2)
		cs[1].(map[string]any)["replicas"] = int64(2)
		setComponents(u, cs)
		Expect(env.Client.Update(ctx, u)).To(MatchError(And(ContainSubstring("spec.components[1].minAvailable"), ContainSubstring("immutable"))))
	})

	// Dynamo's webhook refuses these on update; this operator rolls them safely (a new
	// component is added, a removed one drained, a worker turning multinode or a new
	// backendFramework is a new worker revision).
	It("accepts adding and removing components, turning a worker multinode and changing backendFramework", func() {
		u := read("test", "testdata", "dynamo", "vllm-disagg.yaml")
		Expect(env.Client.Create(ctx, u)).To(Succeed())
		cs := components(u)
		planner := map[string]any{"name": "Planner", "type": "planner", "podTemplate": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "main", "image": "planner:1"}}}}}
		cs = append(cs[:2], planner) // the prefill worker removed, a planner added
		cs[1].(map[string]any)["multinode"] = map[string]any{"nodeCount": int64(2)}
		setComponents(u, cs)
		Expect(unstructured.SetNestedField(u.Object, "sglang", "spec", "backendFramework")).To(Succeed())
		Expect(env.Client.Update(ctx, u, client.FieldValidation("Strict"))).To(Succeed())
	})

	It("refuses duplicate component names (in any letter case) and an unknown type, naming the field", func() {
		u := read("test", "testdata", "dynamo", "vllm-disagg.yaml")
		cs := components(u)
		cs[2].(map[string]any)["name"] = "vllmdecodeworker"
		setComponents(u, cs)
		Expect(env.Client.Create(ctx, u)).To(MatchError(ContainSubstring("component names must be unique")))
		u = read("test", "testdata", "dynamo", "vllm-disagg.yaml")
		cs = components(u)
		cs[1].(map[string]any)["type"] = "gateway"
		setComponents(u, cs)
		Expect(env.Client.Create(ctx, u)).To(MatchError(ContainSubstring("spec.components[1].type")))
	})

	It("bounds replicas and nodeCount as v1alpha1 does, naming the field, and takes component names of 63 characters and two frontends (Dynamo's limits)", func() {
		set := func(i int, field string, v any) *unstructured.Unstructured {
			u := read("test", "testdata", "dynamo", "vllm-disagg.yaml")
			cs := components(u)
			Expect(unstructured.SetNestedField(cs[i].(map[string]any), v, field)).To(Succeed())
			setComponents(u, cs)
			return u
		}
		Expect(env.Client.Create(ctx, set(1, "replicas", int64(10001)))).To(MatchError(ContainSubstring("spec.components[1].replicas: Invalid value: 10001")))
		Expect(env.Client.Create(ctx, set(1, "replicas", int64(10000)))).To(Succeed())
		u := set(1, "multinode", map[string]any{"nodeCount": int64(100000)})
		Expect(env.Client.Create(ctx, u)).To(MatchError(ContainSubstring("spec.components[1].multinode.nodeCount: Invalid value: 100000")))
		long := strings.Repeat("w", 63)
		Expect(env.Client.Create(ctx, set(1, "name", long))).To(Succeed())
		Expect(env.Client.Create(ctx, set(1, "name", long+"w"))).To(MatchError(ContainSubstring("spec.components[1].name: Too long")))
		Expect(env.Client.Create(ctx, set(1, "type", "frontend"))).To(Succeed())
	})
})
