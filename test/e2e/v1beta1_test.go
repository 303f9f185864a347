package e2e

import (
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dgd-rollout/operator/api/conversion"
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

	It("rolls a multinode graph (LeaderWorkerSets, prefill 4x2 / decode 2x4) written and changed in v1beta1, gangs whole", func() {
		var b v1beta1.DynamoGraphDeployment
		Expect(conversion.ToHub(gpus(harness.NewDGD(newNamespace(), "gangs").Disagg(4, 2, "vllm:v1").
			Multinode("prefill", 2).Multinode("decode", 4).Obj()), &b)).To(Succeed())
		delete(b.Annotations, conversion.AnnotationSpec)
		s := startObject(&b)
		checkGangs(s)
		update(s, harness.BetaImage("vllm:v2"))
		s.waitRolledOut(2)
		checkGangs(s)
		Expect(s.w.Snapshot().MinReady["prefill"]).To(BeNumerically(">=", 3))
	})

	// Dynamo's multinode examples as written (one gang per role), on one GPU per pod (the
	// local nodes have 8 each). Before issue 22 a new revision's decode leaders were
	// intermittently missing from discovery here: the LeaderWorkerSet's headless Service
	// and the revision's discovery Service shared one name.
	DescribeTable("rolls Dynamo's multinode disaggregated example (LeaderWorkerSets) to a new image, gangs whole",
		func(file, image string) {
			b := example(file)
			for i := range b.Spec.Components {
				if c := &b.Spec.Components[i]; c.Multinode != nil {
					c.PodTemplate.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"] = resource.MustParse("1")
				}
			}
			s := startObject(b)
			checkGangs(s)
			update(s, harness.BetaImage(image))
			s.waitRolledOut(2)
			checkGangs(s)
		},
		Entry("SGLang", "sglang-disagg-multinode.yaml", "nvcr.io/nvidia/ai-dynamo/sglang-runtime:1.3.2"),
		Entry("vLLM", "vllm-disagg-multinode.yaml", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.2"),
		Entry("TRT-LLM", "trtllm-disagg-multinode.yaml", "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:1.3.2"),
	)

	It("deploys Dynamo's aggregated vLLM example", func() {
		startObject(example("vllm-agg.yaml")) // revision 1 rolled out, discovered, under the watcher and observer
	})
})

func ptrTo[T any](v T) *T { return &v }
