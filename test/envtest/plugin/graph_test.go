package plugin_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/harness"
)

// frontendImage is the image of the live DGD's Frontend.
func frontendImage(ns, name string) string {
	return getDGD(ns, name).Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image
}

func setFrontend(image string) func(*v1alpha1.DynamoGraphDeployment) {
	return func(d *v1alpha1.DynamoGraphDeployment) {
		d.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = image
	}
}

var _ = Describe("whole-graph revisions", func() {
	It("record a frontend-only change as a revision that rolls no worker, and undo restores the frontend", func() {
		ns := newNamespace()
		deploy(withCause(harness.NewDGD(ns, "graph").Service("Frontend", "frontend", "", 1, "dynamo:v1").
			Disagg(2, 1, "vllm:v1").Obj(), "kubectl apply -f graph.yaml"))
		v1Workers := getDGD(ns, "graph").Status.UpdateWorkerHash

		By("revision 2 moves the frontend and the workers")
		change(ns, "graph", func(d *v1alpha1.DynamoGraphDeployment) {
			harness.SetImage(d, "vllm:v2")
			setFrontend("dynamo:v2")(d)
			withCause(d, "frontend and workers to v2")
		})
		_, err := env.Drive(ctx, ns, "graph", -1, 20, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
		v2Workers := getDGD(ns, "graph").Status.UpdateWorkerHash
		Expect(v2Workers).NotTo(Equal(v1Workers))

		By("revision 3 moves the frontend alone: the workers keep their hash and workloads")
		change(ns, "graph", setFrontend("dynamo:v3"))
		steps, err := env.Drive(ctx, ns, "graph", -1, 20, harness.CompletedAt(3))
		Expect(err).NotTo(HaveOccurred())
		for _, st := range steps {
			for _, w := range st.Workloads {
				if w.Hash != "" {
					Expect(w.Hash).To(Equal(v2Workers), "a worker workload of another revision during a frontend-only change")
				}
			}
		}
		Expect(getDGD(ns, "graph").Status.UpdateWorkerHash).To(Equal(v2Workers))

		By("a change cause recorded after the change (kubectl annotate) reaches revision 3")
		change(ns, "graph", func(d *v1alpha1.DynamoGraphDeployment) { withCause(d, "frontend to v3") })
		Eventually(func() map[int64]string {
			causes := map[int64]string{}
			for _, r := range revisionsOf(ns) {
				causes[r.Revision] = r.Annotations[v1alpha1.AnnotationChangeCause]
			}
			return causes
		}).WithTimeout(10 * time.Second).Should(Equal(map[int64]string{1: "kubectl apply -f graph.yaml", 2: "frontend and workers to v2", 3: "frontend to v3"}))
		t := &transcript{ns: ns}
		t.must("rollout", "history", "graph")
		t.must("rollout", "history", "graph", "--revision=3")

		By("undo to revision 1 restores every service: workers roll back, the frontend too")
		t.must("rollout", "undo", "graph", "--to-revision=1")
		Expect(frontendImage(ns, "graph")).To(Equal("dynamo:v1"))
		Expect(workerImages(ns, "graph")).To(Equal(map[string]string{"prefill": "vllm:v1", "decode": "vllm:v1"}))
		_, err = env.Drive(ctx, ns, "graph", -1, 20, harness.CompletedAt(4))
		Expect(err).NotTo(HaveOccurred())
		Expect(getDGD(ns, "graph").Status.UpdateWorkerHash).To(Equal(v1Workers))
		Expect(revisionsOf(ns)).To(HaveLen(3), "revision 1 renumbered 4, not duplicated")
		t.must("rollout", "history", "graph")
		expectGolden("whole-graph", t.String())
	})
})

// revisionsOf lists the ControllerRevisions in ns.
func revisionsOf(ns string) []appsv1.ControllerRevision {
	var list appsv1.ControllerRevisionList
	Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}
