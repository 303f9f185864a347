package plugin_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/harness"
)

// workerImages maps worker service -> image of the live DGD.
func workerImages(ns, name string) map[string]string {
	d := getDGD(ns, name)
	out := map[string]string{}
	for _, s := range d.WorkerServiceNames() {
		out[s] = d.Spec.Services[s].ExtraPodSpec.MainContainer.Image
	}
	return out
}

// revisionNumbers maps worker hash -> ControllerRevision number in ns.
func revisionNumbers(ns string) map[string]int64 {
	var list appsv1.ControllerRevisionList
	Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	out := map[string]int64{}
	for _, r := range list.Items {
		out[r.Labels[v1alpha1.LabelWorkerHash]] = r.Revision
	}
	return out
}

var _ = Describe("rollout undo", func() {
	It("rolls back to the previous revision, which the operator renumbers as the newest", func() {
		ns := newNamespace()
		deploy(withCause(harness.NewDGD(ns, "undo").Disagg(2, 1, "vllm:v1").Obj(), "kubectl apply -f disagg.yaml"))
		v1Hash := getDGD(ns, "undo").Status.UpdateRevision
		rollImage(ns, "undo", "vllm:v2", 2)
		v2 := map[string]string{"prefill": "vllm:v2", "decode": "vllm:v2"}

		t := &transcript{ns: ns}
		By("dry runs change nothing")
		t.must("rollout", "undo", "undo", "--dry-run=server")
		t.must("rollout", "undo", "undo", "--dry-run=client")
		Expect(workerImages(ns, "undo")).To(Equal(v2))

		By("undo restores revision 1's templates; the operator rolls to them as revision 3")
		t.must("rollout", "undo", "undo")
		Expect(workerImages(ns, "undo")).To(Equal(map[string]string{"prefill": "vllm:v1", "decode": "vllm:v1"}))
		_, err := env.Drive(ctx, ns, "undo", -1, 20, harness.CompletedAt(3))
		Expect(err).NotTo(HaveOccurred())
		Expect(getDGD(ns, "undo").Status.UpdateRevision).To(Equal(v1Hash), "the old revision is reused, not duplicated")
		Expect(revisionNumbers(ns)).To(HaveLen(2))
		t.must("rollout", "history", "undo")

		By("nothing to do, and unknown revisions")
		t.must("rollout", "undo", "undo", "--to-revision=3")
		t.fails("rollout", "undo", "undo", "--to-revision=7")

		By("undo --to-revision goes back to v2, renumbered 4")
		t.must("rollout", "undo", "undo", "--to-revision=2")
		_, err = env.Drive(ctx, ns, "undo", -1, 20, harness.CompletedAt(4))
		Expect(err).NotTo(HaveOccurred())
		Expect(workerImages(ns, "undo")).To(Equal(v2))
		t.must("rollout", "history", "undo")
		expectGolden("undo", t.String())
	})

	It("has nothing to undo with a single revision", func() {
		ns := newNamespace()
		deploy(harness.NewDGD(ns, "single").Disagg(1, 1, "vllm:v1").Obj())
		t := &transcript{ns: ns}
		t.fails("rollout", "undo", "single")
		t.must("rollout", "undo", "single", "--to-revision=1")
		expectGolden("undo-single", t.String())
	})
})
