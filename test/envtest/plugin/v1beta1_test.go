package plugin_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/conversion"
	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/test/harness"
)

// The plugin reads and writes DGDs as v1beta1 and converts them itself: a graph
// written in v1beta1 has the history of the same graph written in v1alpha1
// (testdata/history.golden), a revision printed in the shape it was written in
// (spec.components, as the user's manifest: writtenVersion).
var _ = Describe("a DGD written in v1beta1", func() {
	It("has the same history as in v1alpha1, its revisions printed as v1beta1 (testdata/history-v1beta1.golden), and pause, resume and undo work on it", func() {
		ns := newNamespace()
		var b v1beta1.DynamoGraphDeployment
		Expect(conversion.ToHub(withCause(harness.NewDGD(ns, "hist").Disagg(2, 1, "vllm:v1").Obj(), "kubectl apply -f disagg.yaml"), &b)).To(Succeed())
		Expect(b.Annotations).NotTo(HaveKey(conversion.AnnotationSpec), "the same graph, written in v1beta1 as a user would")
		Expect(env.Client.Create(ctx, &b)).To(Succeed())
		_, err := env.Drive(ctx, ns, "hist", -1, 10, harness.CompletedAt(1))
		Expect(err).NotTo(HaveOccurred())
		Expect(harness.UpdateBeta(ctx, env.Client, ns, "hist", func(d *v1beta1.DynamoGraphDeployment) {
			harness.BetaImage("vllm:v2")(d)
			metav1.SetMetaDataAnnotation(&d.ObjectMeta, v1alpha1.AnnotationChangeCause, "set image vllm:v2")
		})).To(Succeed())
		_, err = env.Drive(ctx, ns, "hist", -1, 20, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())

		t := &transcript{ns: ns}
		t.must("rollout", "history", "hist")
		t.must("rollout", "history", "hist", "--revision=1")
		t.fails("rollout", "history", "hist", "--revision=7")
		expectGolden("history-v1beta1", t.String())

		more := &transcript{ns: ns}
		more.must("rollout", "pause", "hist")
		Expect(rolloutSpec(ns, "hist").Paused).To(BeTrue())
		more.must("rollout", "resume", "hist")
		more.must("rollout", "undo", "hist")
		_, err = env.Drive(ctx, ns, "hist", -1, 20, harness.CompletedAt(3))
		Expect(err).NotTo(HaveOccurred())
		var after v1beta1.DynamoGraphDeployment
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hist"}, &after)).To(Succeed())
		for _, c := range after.Spec.Components {
			if c.ComponentType != v1beta1.ComponentTypeFrontend {
				Expect(c.PodTemplate.Spec.Containers[0].Image).To(Equal("vllm:v1"), "undo restored revision 1, read in v1beta1")
			}
		}
	})
})
