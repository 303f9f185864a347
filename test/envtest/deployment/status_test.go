package deployment_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers"
	"github.com/dgd-rollout/operator/test/harness"
)

func getDGD(ns, name string) *v1alpha1.DynamoGraphDeployment {
	var d v1alpha1.DynamoGraphDeployment
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
	return &d
}

func eventReasons(ns string) []string {
	var list eventsv1.EventList
	Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason)
	}
	return out
}

// reconciles reads controller-runtime's reconcile counter for the DGD controller.
func reconciles() float64 {
	n, err := harness.Reconciles()
	Expect(err).NotTo(HaveOccurred())
	return n
}

var _ = Describe("progress deadline", func() {
	It("reports Failed / ProgressDeadlineExceeded when no replica becomes ready in time, and recovers", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "stuck").Disagg(2, 1, "vllm:v1").Obj()
		deploy(obj)
		update(ns, "stuck", func(d *v1alpha1.DynamoGraphDeployment) {
			harness.SetImage(d, "vllm:broken")
			d.Spec.Rollout = &v1alpha1.RolloutSpec{ProgressDeadlineSeconds: ptr.To[int32](2)}
		})
		Eventually(func() v1alpha1.RolloutPhase {
			return getDGD(ns, "stuck").Status.RollingUpdate.Phase
		}, "10s").Should(Equal(v1alpha1.RolloutFailed))
		d := getDGD(ns, "stuck")
		c := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionProgressing)
		Expect(c).NotTo(BeNil())
		Expect(c.Status).To(BeEquivalentTo("False"))
		Expect(c.Reason).To(Equal("ProgressDeadlineExceeded"))
		// Events follow the status write that decided them: wait for it, not assume it.
		Eventually(func() []string { return eventReasons(ns) }).Should(ContainElement("ProgressDeadlineExceeded"))
		By("the old revision kept serving: availability held while stuck")
		Expect(meta.IsStatusConditionTrue(d.Status.Conditions, v1alpha1.ConditionAvailable)).To(BeTrue())
		By("readiness arrives: it keeps trying and completes")
		_, err := env.Drive(ctx, ns, "stuck", -1, 20, harness.Snapshot.Completed)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() []string { return eventReasons(ns) }).Should(ContainElements("RolloutStarted", "RolloutStep", "RolloutCompleted"))
	})
})

var _ = Describe("invalid spec the CRD cannot check", func() {
	It("sets Ready=False with reason InvalidSpec naming the field, and creates nothing", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "noimage").Disagg(1, 1, "vllm:v1").Obj()
		obj.Spec.Services["decode"].ExtraPodSpec.MainContainer.Image = ""
		Expect(env.Client.Create(ctx, obj)).To(Succeed())
		Eventually(func() string {
			c := meta.FindStatusCondition(getDGD(ns, "noimage").Status.Conditions, v1alpha1.ConditionReady)
			if c == nil || c.Reason != "InvalidSpec" {
				return ""
			}
			return c.Message
		}).Should(ContainSubstring("spec.services[decode].extraPodSpec.mainContainer.image is required"))
		ds, err := env.Deployments(ctx, ns, "noimage")
		Expect(err).NotTo(HaveOccurred())
		Expect(ds).To(BeEmpty())
		Eventually(func() []string { return eventReasons(ns) }).Should(ContainElement("InvalidSpec"))
	})
})

var _ = Describe("steady state", func() {
	It("makes no API write when a reconcile finds nothing to change", func() {
		ns := newNamespace()
		s := deploy(harness.NewDGD(ns, "quiet").Disagg(2, 1, "vllm:v1").Obj())
		rvs := func() string {
			snap, err := env.Take(ctx, ns, "quiet")
			Expect(err).NotTo(HaveOccurred())
			parts := []string{snap.DGD.ResourceVersion}
			for _, d := range snap.All {
				parts = append(parts, d.Name+"="+d.ResourceVersion)
			}
			return strings.Join(parts, ",")
		}
		By("touching a worker Deployment's labels triggers a reconcile through the Owns watch")
		before := reconciles()
		d := s.All[len(s.All)-1]
		patch := client.MergeFrom(d.DeepCopy())
		d.Labels["touched"] = "yes"
		Expect(env.Client.Patch(ctx, &d, patch)).To(Succeed())
		after := rvs()
		Eventually(reconciles).Should(BeNumerically(">", before), "the counter moves when a reconcile has returned")
		Expect(rvs()).To(Equal(after))
	})
})

var _ = Describe("completion", func() {
	It("writes its last status with the step that deletes the old revision: the old pods going afterwards write nothing", func() {
		ns := newNamespace()
		s := deploy(harness.NewDGD(ns, "tail").Disagg(1, 1, "vllm:v1").Obj())
		var oldHash string
		for _, d := range s.All {
			if d.Labels[v1alpha1.LabelService] == "decode" {
				oldHash = d.Labels[v1alpha1.LabelWorkerHash]
			}
		}
		Expect(oldHash).NotTo(BeEmpty())
		By("a decode pod of revision 1 outlives its Deployment, as a terminating pod does")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tail-decode-old", Labels: map[string]string{
				v1alpha1.LabelGraph: "tail", v1alpha1.LabelService: "decode", v1alpha1.LabelWorkerHash: oldHash}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "vllm:v1"}}},
		}
		Expect(env.Client.Create(ctx, pod)).To(Succeed())
		update(ns, "tail", harness.Image("vllm:v2"))
		_, err := env.Drive(ctx, ns, "tail", -1, 40, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
		d := getDGD(ns, "tail")
		Expect(d.Status.RollingUpdate.Phase).To(Equal(v1alpha1.RolloutCompleted))
		var newHash string
		for _, w := range d.Status.Services["decode"].Workloads {
			newHash = w.Name[strings.LastIndex(w.Name, "-")+1:]
		}
		Expect(newHash).NotTo(Equal(oldHash))
		Expect(d.Status.Services["decode"].RuntimeNamespaces).To(Equal([]string{backends.EffectiveNamespace(d, true, newHash)}),
			"a deleted workload's terminating pods are out of discovery")
		By("the old pod going starts a pass that finds the status unchanged")
		before := reconciles()
		Expect(env.Client.Delete(ctx, pod)).To(Succeed())
		Eventually(reconciles).Should(BeNumerically(">", before), "the counter moves when a reconcile has returned")
		Expect(getDGD(ns, "tail").ResourceVersion).To(Equal(d.ResourceVersion))
	})
})

var _ = Describe("rollout events", func() {
	It("keeps one RolloutStep Event per step, each with its own message, none folded into another's series", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "steps").Disagg(4, 2, "vllm:v1").Rollout("1", "0").Obj()
		deploy(obj)
		before := testutil.ToFloat64(controllers.RolloutSteps.WithLabelValues(ns, "steps"))
		update(ns, "steps", harness.Image("vllm:v2"))
		_, err := env.Drive(ctx, ns, "steps", -1, 40, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
		steps := int(testutil.ToFloat64(controllers.RolloutSteps.WithLabelValues(ns, "steps")) - before)
		Expect(steps).To(BeNumerically(">=", 4), "P=4/D=2 at maxSurge 1 takes several steps")
		Eventually(func(g Gomega) {
			var list eventsv1.EventList
			g.Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			notes := map[string]bool{}
			for _, e := range list.Items {
				if e.Reason != v1alpha1.EventRolloutStep || e.Regarding.Name != "steps" {
					continue
				}
				g.Expect(e.Series).To(BeNil(), "step %q was counted into a series", e.Note)
				g.Expect(notes).NotTo(HaveKey(e.Note))
				notes[e.Note] = true
			}
			// The steps of the first deploy happened before `before`, their events too.
			g.Expect(len(notes)).To(BeNumerically(">=", steps))
			// Exactly one RolloutCompleted for revision 2: a repeat of the same message
			// would be a series on one Event.
			completed := 0
			for _, e := range list.Items {
				if e.Reason == v1alpha1.EventRolloutCompleted && e.Note == "every worker is on revision 2" {
					completed++
					g.Expect(e.Series).To(BeNil(), "RolloutCompleted said again")
				}
			}
			g.Expect(completed).To(Equal(1))
		}).Should(Succeed())
	})
})
