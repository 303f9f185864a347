package deployment_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/test/health"
)

// verdicts is what kubectl wait --for=condition=Ready, kstatus (cli-utils) and Argo CD
// (config/argocd/health.lua) make of a status the operator wrote.
type verdicts struct {
	ready, reconciling, stalled metav1.ConditionStatus
	readyReason                 string
	kstatus, argo               string
}

func verdictsOf(d *v1alpha1.DynamoGraphDeployment) verdicts {
	cond := func(t string) *metav1.Condition {
		c := meta.FindStatusCondition(d.Status.Conditions, t)
		Expect(c).NotTo(BeNil(), "condition %s", t)
		Expect(c.ObservedGeneration).To(Equal(d.Generation), "condition %s", t)
		return c
	}
	k, _, err := health.KStatus(d)
	Expect(err).NotTo(HaveOccurred())
	a, msg, err := health.ArgoCD(d)
	Expect(err).NotTo(HaveOccurred())
	Expect(msg).NotTo(BeEmpty())
	return verdicts{ready: cond(v1alpha1.ConditionReady).Status, readyReason: cond(v1alpha1.ConditionReady).Reason,
		reconciling: cond(v1alpha1.ConditionReconciling).Status, stalled: cond(v1alpha1.ConditionStalled).Status, kstatus: k, argo: a}
}

var _ = Describe("status for tools", func() {
	It("reads InProgress mid-rollout, Current and Ready when held at a partition or rolled out, Failed past the deadline: kstatus, Argo CD and Ready agree", func() {
		ns := newNamespace()
		deploy(harness.NewDGD(ns, "tools").Disagg(4, 2, "vllm:v1").Rollout("1", "0").Obj())
		Expect(verdictsOf(getDGD(ns, "tools"))).To(Equal(verdicts{ready: "True", readyReason: v1alpha1.ReasonAllReplicasReady,
			reconciling: "False", stalled: "False", kstatus: "Current", argo: "Healthy"}))

		By("mid-rollout")
		update(ns, "tools", harness.Image("vllm:v2"))
		steps, err := env.Drive(ctx, ns, "tools", -1, 20, func(s harness.Snapshot) bool { return s.PoolSize(s.UpdateHash()) >= 2 })
		Expect(err).NotTo(HaveOccurred())
		Expect(steps[len(steps)-1].Completed()).To(BeFalse())
		Expect(verdictsOf(getDGD(ns, "tools"))).To(Equal(verdicts{ready: "False", readyReason: v1alpha1.ReasonReplicasNotReady,
			reconciling: "True", stalled: "False", kstatus: "InProgress", argo: "Progressing"}))

		By("held at a partition, every replica ready")
		update(ns, "tools", func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Partition = ptrIntStr("50%") })
		_, err = env.Drive(ctx, ns, "tools", -1, 20, harness.PhaseIs(v1alpha1.RolloutPaused, v1alpha1.ReasonPartitioned))
		Expect(err).NotTo(HaveOccurred())
		d := getDGD(ns, "tools")
		Expect(verdictsOf(d)).To(Equal(verdicts{ready: "True", readyReason: v1alpha1.ReasonPartitioned,
			reconciling: "False", stalled: "False", kstatus: "Current", argo: "Suspended"}))
		Expect(meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionReady).Message).To(MatchRegexp(`^(\d+)/(\d+) replicas ready; rollout held: `))

		By("promoted and rolled out")
		update(ns, "tools", func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Partition = nil })
		_, err = env.Drive(ctx, ns, "tools", -1, 20, harness.Snapshot.Completed)
		Expect(err).NotTo(HaveOccurred())
		Expect(verdictsOf(getDGD(ns, "tools"))).To(Equal(verdicts{ready: "True", readyReason: v1alpha1.ReasonAllReplicasReady,
			reconciling: "False", stalled: "False", kstatus: "Current", argo: "Healthy"}))

		By("no progress past the deadline")
		update(ns, "tools", func(d *v1alpha1.DynamoGraphDeployment) {
			harness.SetImage(d, "vllm:broken")
			d.Spec.Rollout.ProgressDeadlineSeconds = ptr.To[int32](2)
		})
		Eventually(func() v1alpha1.RolloutPhase { return getDGD(ns, "tools").Status.RollingUpdate.Phase }, "10s").Should(Equal(v1alpha1.RolloutFailed))
		Expect(verdictsOf(getDGD(ns, "tools"))).To(Equal(verdicts{ready: "False", readyReason: v1alpha1.ReasonReplicasNotReady,
			reconciling: "False", stalled: "True", kstatus: "Failed", argo: "Degraded"}))
	})

	It("reads an analysis hold as Current and Suspended, an aborted rollout as Failed and Degraded", func() {
		ns := newNamespace()
		deployCanary(ns, "analysed", errorRate(1000, 0))
		env.Metrics.Answer(func(string) analysis.Result { return harness.Value(0.01) })
		update(ns, "analysed", harness.Image("vllm:v2"))
		_, err := env.Drive(ctx, ns, "analysed", -1, 20, harness.PhaseIs(v1alpha1.RolloutPaused, v1alpha1.ReasonAnalysisRunning))
		Expect(err).NotTo(HaveOccurred())
		Expect(verdictsOf(getDGD(ns, "analysed"))).To(Equal(verdicts{ready: "True", readyReason: v1alpha1.ReasonAnalysisRunning,
			reconciling: "False", stalled: "False", kstatus: "Current", argo: "Suspended"}))

		update(ns, "analysed", func(d *v1alpha1.DynamoGraphDeployment) {
			metav1.SetMetaDataAnnotation(&d.ObjectMeta, v1alpha1.AnnotationAbort, "2/1")
		})
		_, err = env.Drive(ctx, ns, "analysed", -1, 20, func(s harness.Snapshot) bool {
			return harness.PhaseIs(v1alpha1.RolloutAborted, "")(s) && s.DGD.Status.RollingUpdate.EndTime != nil
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(verdictsOf(getDGD(ns, "analysed"))).To(Equal(verdicts{ready: "False", readyReason: v1alpha1.ReasonRolloutAborted,
			reconciling: "False", stalled: "True", kstatus: "Failed", argo: "Degraded"}))
	})
})
