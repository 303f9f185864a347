package deployment_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
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

		By("a pass of this DGD started by an event of every object it owns writes nothing, anywhere")
		Expect(steadyWrites(ns, "quiet")).To(BeEmpty())
	})

	It("catches a broken operator that writes in steady state (its Service updated unchanged on every pass)", func() {
		// A decorator around the operator's client: every pass (its Get of the DGD)
		// also updates one of the DGD's Services with what it read: a write the former
		// check, which compared only the DGD's and the Deployments' resourceVersions
		// around one pass, never saw.
		Expect(env.RestartOperator(harness.Broken{NewClient: func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, opts)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if err := c.Get(ctx, key, obj, opts...); err != nil {
					return err
				}
				// The operator reads DGDs as v1beta1 (the storage version); either counts.
				switch obj.(type) {
				case *v1alpha1.DynamoGraphDeployment, *v1beta1.DynamoGraphDeployment:
					var svcs corev1.ServiceList
					if c.List(ctx, &svcs, client.InNamespace(key.Namespace), client.MatchingLabels{v1alpha1.LabelGraph: key.Name}) == nil && len(svcs.Items) > 0 {
						_ = c.Update(ctx, &svcs.Items[0])
					}
				}
				return nil
			}}), nil
		}})).To(Succeed())
		DeferCleanup(func() { Expect(env.RestartOperator(harness.Broken{})).To(Succeed()) })
		ns := newNamespace()
		deploy(harness.NewDGD(ns, "noisy").Disagg(2, 1, "vllm:v1").Obj())
		failures := InterceptGomegaFailures(func() { steadyWrites(ns, "noisy") })
		Expect(failures).To(ContainElement(ContainSubstring("PUT services "+ns+"/noisy-")), "the steady-state check must fail")
	})
})

// steadyWrites returns every write the operator sends to namespace ns or to a
// cluster-scoped object, counted by its recording proxy, from the moment the settled
// DGD ns/name is at rest until passes of it started by an event of every object it
// owns (each touched with a label: the DGD, its Deployments, Services,
// ControllerRevisions, ServiceAccounts, Roles and RoleBindings) have returned. At rest:
// a pass started after a moment returned and the operator wrote nothing since that
// moment (an Event of its last step may still have been on its way); it fails when
// that never happens.
func steadyWrites(ns, name string) []string {
	GinkgoHelper()
	n := 0
	touch := func(o client.Object) {
		GinkgoHelper()
		n++
		t := time.Now()
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{"test.dgd-rollout/touched":"%d"}}}`, n))
		Expect(env.Client.Patch(ctx, o, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		Eventually(func() int { return env.PassesSince(ns, name, t) }).Should(BeNumerically(">", 0), "a pass after %T %s changed", o, o.GetName())
	}
	dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	var rest time.Time
	Eventually(func() []string {
		t := time.Now()
		touch(dgd)
		rest = t
		return env.OperatorWrites(t, ns)
	}, 5*time.Second, 0).Should(BeEmpty(), "the operator never comes to rest")
	owned := map[string]int{}
	for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}, &appsv1.ControllerRevisionList{},
		&corev1.ServiceAccountList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{}} {
		Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		Expect(meta.EachListItem(list, func(o runtime.Object) error {
			if obj := o.(client.Object); isOwnedBy(obj, name) {
				owned[fmt.Sprintf("%T", obj)]++
				touch(obj)
			}
			return nil
		})).To(Succeed())
	}
	// This suite runs etcd discovery (harness.OperatorDiscovery: it plays no pods), so
	// the DGD has no discovery Services, service account, Role or RoleBinding here; the
	// crash suite's restarts with nothing to do count writes under Kubernetes discovery.
	Expect(owned).To(HaveKey("*v1.Deployment"), "Deployments were touched: %v", owned)
	Expect(owned).To(HaveKey("*v1.Service"), "a Service was touched: %v", owned)
	Expect(owned).To(HaveKey("*v1.ControllerRevision"), "a ControllerRevision was touched: %v", owned)
	touch(dgd)
	return env.OperatorWrites(rest, ns)
}

func isOwnedBy(o client.Object, dgd string) bool {
	for _, r := range o.GetOwnerReferences() {
		if r.Kind == "DynamoGraphDeployment" && r.Name == dgd {
			return true
		}
	}
	return false
}

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
				v1alpha1.LabelGraph: "tail", v1alpha1.LabelService: "decode", v1alpha1.LabelWorkerHash: oldHash,
				v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}}, // a pod of ours carries our Deployment template's labels
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
