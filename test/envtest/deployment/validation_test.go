package deployment_test

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/test/harness"
)

// base is a valid DGD as unstructured YAML; each case mutates one thing.
const base = `
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: bad}
spec:
  services:
    Frontend:
      componentType: frontend
      extraPodSpec: {mainContainer: {image: fe:v1}}
    worker:
      componentType: worker
      replicas: 2
      extraPodSpec: {mainContainer: {image: w:v1}}
`

func parse(doc string) *unstructured.Unstructured {
	var m map[string]any
	Expect(yaml.Unmarshal([]byte(doc), &m)).To(Succeed())
	return &unstructured.Unstructured{Object: m}
}

func set(u *unstructured.Unstructured, value any, path ...string) {
	Expect(unstructured.SetNestedField(u.Object, value, path...)).To(Succeed())
}

var _ = Describe("admission validation", func() {
	type invalid struct {
		mutate func(*unstructured.Unstructured)
		want   []string // substrings of the error: the field path and the rule
	}
	svc := func(p ...string) []string { return append([]string{"spec", "services", "worker"}, p...) }
	ro := func(p string) []string { return []string{"spec", "rollout", p} }
	DescribeTable("rejects bad input with a message naming the field",
		func(c invalid) {
			u := parse(base)
			u.SetNamespace(newNamespace())
			c.mutate(u)
			err := env.Client.Create(ctx, u)
			Expect(err).To(HaveOccurred())
			for _, w := range c.want {
				Expect(err.Error()).To(ContainSubstring(w))
			}
		},
		Entry("negative replicas", invalid{func(u *unstructured.Unstructured) { set(u, int64(-1), svc("replicas")...) },
			[]string{"spec.services.worker.replicas", "greater than or equal to 0"}}),
		Entry("maxSurge and maxUnavailable both 0", invalid{func(u *unstructured.Unstructured) {
			set(u, int64(0), ro("maxSurge")...)
			set(u, "0%", ro("maxUnavailable")...)
		}, []string{"spec.rollout.maxUnavailable", "cannot both be 0"}}),
		Entry("partition above 100%", invalid{func(u *unstructured.Unstructured) { set(u, "101%", ro("partition")...) },
			[]string{"spec.rollout.partition", "0% to 100%"}}),
		Entry("negative partition", invalid{func(u *unstructured.Unstructured) { set(u, int64(-1), ro("partition")...) },
			[]string{"spec.rollout.partition", "non-negative"}}),
		Entry("maxSurge not a number or percentage", invalid{func(u *unstructured.Unstructured) { set(u, "lots", ro("maxSurge")...) },
			[]string{"spec.rollout.maxSurge"}}),
		Entry("negative maxUnavailable", invalid{func(u *unstructured.Unstructured) { set(u, int64(-2), ro("maxUnavailable")...) },
			[]string{"spec.rollout.maxUnavailable"}}),
		Entry("unknown strategy", invalid{func(u *unstructured.Unstructured) { set(u, "BlueGreen", ro("strategy")...) },
			[]string{"spec.rollout.strategy", "Unsupported value"}}),
		Entry("progressDeadlineSeconds 0", invalid{func(u *unstructured.Unstructured) { set(u, int64(0), ro("progressDeadlineSeconds")...) },
			[]string{"spec.rollout.progressDeadlineSeconds"}}),
		Entry("nodeCount 1", invalid{func(u *unstructured.Unstructured) { set(u, int64(1), svc("multinode", "nodeCount")...) },
			[]string{"spec.services.worker.multinode.nodeCount", "greater than or equal to 2"}}),
		Entry("more than one frontend", invalid{func(u *unstructured.Unstructured) {
			set(u, map[string]any{"componentType": "frontend"}, "spec", "services", "Frontend2")
		}, []string{"spec.services", "at most one service may have componentType frontend"}}),
		Entry("unknown backend", invalid{func(u *unstructured.Unstructured) { set(u, "Kubeflow", "spec", "backend") },
			[]string{"spec.backend", "Unsupported value"}}),
		Entry("multinode service on the Deployment backend", invalid{func(u *unstructured.Unstructured) {
			set(u, "Deployment", "spec", "backend")
			set(u, int64(2), svc("multinode", "nodeCount")...)
		}, []string{"spec.backend", "cannot run multinode services"}}),
		Entry("service name that is not DNS-safe", invalid{func(u *unstructured.Unstructured) {
			set(u, map[string]any{"componentType": "worker"}, "spec", "services", "bad_name")
		}, []string{"spec.services", "service names must be"}}),
		Entry("negative revisionHistoryLimit", invalid{func(u *unstructured.Unstructured) { set(u, int64(-1), "spec", "revisionHistoryLimit") },
			[]string{"spec.revisionHistoryLimit"}}),
		Entry("name too long for a label value", invalid{func(u *unstructured.Unstructured) { u.SetName(strings.Repeat("a", 64)) },
			[]string{"metadata.name must be at most 63 characters"}}),
		Entry("gpu that is not a count", invalid{func(u *unstructured.Unstructured) { set(u, "one", svc("resources", "limits", "gpu")...) },
			[]string{"spec.services.worker.resources.limits.gpu"}}),
	)

	It("accepts Dynamo's own manifests unchanged under strict field validation", func() {
		for _, f := range []string{"disagg.yaml", "disagg-tp2.yaml", "agg.yaml", "disagg-multinode.yaml", "disagg-grove.yaml"} {
			raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "config", "samples", f))
			Expect(err).NotTo(HaveOccurred())
			u := parse(string(raw))
			u.SetNamespace(newNamespace())
			Expect(env.Client.Create(ctx, u, client.FieldValidation("Strict"))).To(Succeed(), f)
		}
	})

	It("accepts free-text componentType and subComponentType, as Dynamo does", func() {
		u := parse(base)
		u.SetNamespace(newNamespace())
		set(u, map[string]any{"componentType": "epp", "subComponentType": "router",
			"extraPodSpec": map[string]any{"mainContainer": map[string]any{"image": "epp:v1"}}}, "spec", "services", "epp")
		Expect(env.Client.Create(ctx, u)).To(Succeed())
	})
})

var _ = Describe("deletion", func() {
	It("leaves every workload and revision controlled by the DGD, so the garbage collector removes them", func() {
		ns := newNamespace()
		s := deploy(harness.NewDGD(ns, "gone").Disagg(2, 1, "vllm:v1").Obj())
		objs := []client.Object{}
		for i := range s.All {
			objs = append(objs, &s.All[i])
		}
		for _, r := range controllerRevisions(ns) {
			objs = append(objs, r.DeepCopy())
		}
		Expect(objs).To(HaveLen(4))
		for _, o := range objs {
			Expect(metav1IsControlledBy(o, &s.DGD)).To(BeTrue(), o.GetName())
		}
		Expect(env.Client.Delete(ctx, &s.DGD)).To(Succeed())
	})
})
