package e2e

import (
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/harness"
)

// Dynamo's current API: DGDs written, and changed, in v1beta1 roll as v1alpha1 ones do,
// under the invariant watcher and the Dynamo observer (which read them through the
// operator's /convert).
var _ = Describe("v1beta1 DGDs on the local control plane", func() {
	example := func(name string) *v1beta1.DynamoGraphDeployment {
		b, err := harness.ReadBeta(filepath.Join(cluster.RepoRoot(), "test", "testdata", "dynamo", name))
		Expect(err).NotTo(HaveOccurred())
		b.Namespace = newNamespace()
		return b
	}
	update := func(s *scenario, change func(*v1beta1.DynamoGraphDeployment)) {
		Expect(harness.UpdateBeta(ctx, k8s, s.ns, s.name, change)).To(Succeed())
	}

	It("rolls Dynamo's disaggregated vLLM example (Deployments) to a new image", func() {
		b := example("vllm-disagg.yaml")
		for i := range b.Spec.Components {
			if b.Spec.Components[i].ComponentType != v1beta1.ComponentTypeFrontend {
				b.Spec.Components[i].Replicas = ptrTo(int32(2))
			}
		}
		s := startObject(b)
		update(s, harness.BetaImage("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.2"))
		s.waitRolledOut(2)
		for _, p := range s.pods() {
			if p.Labels[v1alpha1.LabelWorkerHash] != "" {
				Expect(p.Spec.Containers[0].Image).To(Equal("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.2"))
				Expect(p.Spec.Containers[0].EnvFrom[0].SecretRef.Name).To(Equal("hf-token-secret"))
			}
		}
	})

	It("rolls Dynamo's multinode disaggregated SGLang example (LeaderWorkerSets) to a new image, gang by gang", func() {
		b := example("sglang-disagg-multinode.yaml")
		for i := range b.Spec.Components {
			c := &b.Spec.Components[i]
			if c.Multinode != nil { // one GPU per pod: the local nodes have 8 each
				c.PodTemplate.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"] = resource.MustParse("1")
				// Two gangs per role: with one, the old prefill gang goes as soon as the
				// new one's LeaderWorkerSet counts it ready, before its endpoints reach
				// discovery, and the observer sees a zero-routable gap (readiness from
				// EndpointSlices is issue 22's).
				c.Replicas = ptrTo(int32(2))
			}
		}
		s := startObject(b)
		update(s, harness.BetaImage("nvcr.io/nvidia/ai-dynamo/sglang-runtime:1.3.2"))
		s.waitRolledOut(2)
		checkGangs(s)
	})

	It("deploys Dynamo's other example graphs: aggregated vLLM, multinode vLLM and TRT-LLM", func() {
		for _, name := range []string{"vllm-agg.yaml", "vllm-disagg-multinode.yaml", "trtllm-disagg-multinode.yaml"} {
			b := example(name)
			for i := range b.Spec.Components {
				if c := &b.Spec.Components[i]; c.Multinode != nil {
					c.PodTemplate.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"] = resource.MustParse("1")
				}
			}
			s := startObject(b) // revision 1 rolled out, discovered, under the watcher and observer
			if b.Spec.Components[1].Multinode != nil {
				checkGangs(s)
			}
		}
	})
})

func ptrTo[T any](v T) *T { return &v }
