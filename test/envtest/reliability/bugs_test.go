package reliability_test

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/faults"
	"github.com/dgd-rollout/operator/test/harness"
)

// Operator bugs found by this suite, now fixed; each spec is a regression test:
//   - a pass whose sync failed wrote a status with no workloads (a false outage) and
//     an observedGeneration whose revision it never synced: such a pass writes no status;
//   - a scale by hand racing the operator's own write wedged the DGD: expectations
//     expire after expectationTTL;
//   - a workload stripped of its labels was lost: backends find workloads by controller
//     reference, read (service, revision) from the selector or template, and restore
//     the labels.
//
// They inject their faults deterministically (random faults off), so each reproduces
// on every run.

// deterministic turns random faults off for one spec.
func deterministic() {
	faulty.SetRate(0)
	DeferCleanup(func() {
		faulty.ClearInjected()
		faulty.AfterWrite(nil)
		faulty.SetRate(rate)
	})
}

var _ = Describe("BUG: status written by a pass whose write failed", func() {
	// controllers.Reconcile writes the status even when sync fails. The status is built
	// from p.result, which only computeResult (the last step of sync) fills: a pass that
	// fails on a workload write (scale, create, delete) writes a status with no
	// workloads at all, replicas 0, ready "0/N", Available=False
	// (MinimumReplicasUnavailable) and phase InProgress, although every replica is
	// ready. The next pass (after backoff) writes the real status again, so it is a
	// flap, but anything that watches the DGD (kubectl dgd rollout status, alerts on
	// Available=False, dashboards) sees a full outage; a Completed rollout hit by a
	// failed cleanup delete also flips to InProgress and back, emitting a second
	// RolloutCompleted event and moving endTime.
	bugIt("never reports Available=False or zero ready replicas while every replica is ready", func() {
		deterministic()
		ns := newNamespace()
		deploy(harness.NewDGD(ns, "flap").Disagg(4, 2, "vllm:v1").Rollout("1", "0").Obj())
		log := recordDGD(ns, "flap")
		faulty.Inject(1, faults.InternalError, faults.On(faults.OpUpdate, "Deployment", "scale", ns))
		update(ns, "flap", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
		// maxUnavailable 0 and every replica made ready at once: every service is at or
		// above its desired ready count in every state.
		_, err := drive(ns, "flap", -1, maxSteps, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
		Expect(faulty.Pending()).To(BeZero(), "the fault fired")
		for _, v := range log.stop() {
			Expect(meta.IsStatusConditionTrue(v.Status.Conditions, v1alpha1.ConditionAvailable)).To(BeTrue(),
				"resourceVersion %s: %+v", v.ResourceVersion, meta.FindStatusCondition(v.Status.Conditions, v1alpha1.ConditionAvailable))
			Expect(v.Status.ReadyReplicas).To(BeNumerically(">=", 6), "resourceVersion %s: status %q", v.ResourceVersion, v.Status.Ready)
		}
	})
})

var _ = Describe("BUG: observedGeneration advanced by a pass that never saw the new revision", func() {
	// When creating the new ControllerRevision fails, revisions.Sync returns an error
	// and p.revs.Update stays nil; writeStatus still sets observedGeneration to the new
	// generation and keeps everything else from the previous generation: the old
	// updateRevision, phase Completed, Progressing=True NewRevisionAvailable. That
	// status says "generation N is rolled out": `kubectl dgd rollout status` (which
	// checks observedGeneration, then the phase) prints "successfully rolled out" for a
	// spec the operator has not started on.
	bugIt("never sets observedGeneration to a generation whose worker revision it has not synced", func() {
		deterministic()
		ns := newNamespace()
		deploy(harness.NewDGD(ns, "obs").Disagg(4, 2, "vllm:v1").Obj())
		log := recordDGD(ns, "obs")
		faulty.Inject(1, faults.InternalError, faults.On(faults.OpCreate, "ControllerRevision", "", ns))
		update(ns, "obs", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
		_, err := drive(ns, "obs", -1, maxSteps, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
		Expect(faulty.Pending()).To(BeZero(), "the fault fired")
		for _, v := range log.stop() {
			if v.Status.ObservedGeneration == v.Generation {
				Expect(v.Status.UpdateWorkerHash).To(Equal(specHash(&v)),
					"resourceVersion %s: generation %d observed with phase %+v", v.ResourceVersion, v.Generation, v.Status.RollingUpdate)
			}
		}
	})
})

var _ = Describe("BUG: a scale by hand racing the operator's own write wedges the DGD", func() {
	// controllers/expectations.go remembers the replicas the operator last wrote to a
	// workload until the cache shows them, and a pass that sees any other value acts on
	// nothing and writes no status. If someone (kubectl scale, an HPA, another
	// controller) changes the replicas before the operator's pass sees its own write,
	// the cache never shows the expected value: the expectation never expires (no TTL,
	// unlike kube-controller-manager's ControllerExpectations) and every later pass
	// returns early. The DGD is stuck until the operator restarts: the rollout stops,
	// no status is written (progressDeadlineSeconds never fires), and spec changes
	// (pause, partition, a new image) are ignored.
	//
	// Reproduction: the operator scales a Deployment (its /scale); right after its write returns (and
	// before its next pass), the same Deployment is scaled by hand to one more replica.
	bugIt("acts on a Deployment scaled by hand right after the operator's own write", func() {
		deterministic()
		ns := newNamespace()
		deploy(harness.NewDGD(ns, "race").Disagg(4, 2, "vllm:v1").Rollout("1", "0").Obj())
		var once sync.Once
		var raced atomic.Bool
		faulty.AfterWrite(func(c context.Context, w faults.Write, err error) {
			if err != nil || w.Namespace != ns || w.Kind != "Deployment" || w.Op != faults.OpUpdate || w.Subresource != "scale" {
				return
			}
			once.Do(func() {
				raced.Store(true)
				var d appsv1.Deployment
				Expect(env.Client.Get(c, client.ObjectKey{Namespace: ns, Name: w.Name}, &d)).To(Succeed())
				d.Spec.Replicas = ptr.To(*d.Spec.Replicas + 1)
				Expect(env.Client.Update(c, &d)).To(Succeed())
			})
		})
		update(ns, "race", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
		prev := harness.SettleTimeout
		harness.SettleTimeout = 20 * time.Second
		DeferCleanup(func() { harness.SettleTimeout = prev })
		_, err := drive(ns, "race", -1, maxSteps, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
		Expect(raced.Load()).To(BeTrue(), "the hand scale raced an operator scale")
	})
})

var _ = Describe("BUG: a worker Deployment stripped of the operator's labels is never re-adopted", func() {
	// Every backend's Observe lists workloads by the LabelGraph label and reads the
	// service and revision from labels, although the operator controls the object (its
	// owner reference is intact):
	//   - every label stripped: the Deployment disappears from the operator's view. Each
	//     pass "creates" it again (Ensure finds it, controlled by the DGD, and returns
	//     without touching it) and reports it in the status with 0 ready, so the DGD
	//     reports Available=False (service prefill has 0 ready replicas) while its 4
	//     replicas are ready. On the next rollout the old revision's prefill is never
	//     drained nor deleted: it keeps running next to the new pool (prefill 4 old + 4
	//     new > R + maxSurge = 5) until the DGD is deleted.
	//   - only the worker-hash label stripped: the Deployment is taken for a stable
	//     workload of a worker service and syncStable "deletes" it, but by the stable
	//     name {dgd}-{service} (NotFound, ignored): with that name fixed it would delete
	//     4 ready replicas at once. Then as above: phantom outage in the status, never
	//     drained.
	// Nothing ever puts the labels back (a worker Deployment is never updated after
	// creation).
	for _, onlyHash := range []bool{false, true} {
		what := "every label and annotation"
		if onlyHash {
			what = "the worker-hash label"
		}
		bugIt("re-adopts it when "+what+" is stripped: counted once, reported ready, drained by the next rollout", func() {
			deterministic()
			ns := newNamespace()
			s := deploy(harness.NewDGD(ns, "adopt").Disagg(4, 2, "vllm:v1").Obj())
			victim := workerDeployment(s, "prefill", s.Hashes()[0])
			stripLabels(ns, victim.Name, onlyHash)

			By("the status keeps counting its 4 ready replicas, once")
			Consistently(func(g Gomega) {
				var d v1alpha1.DynamoGraphDeployment
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "adopt"}, &d)).To(Succeed())
				g.Expect(d.Status.Services["prefill"].Replicas).To(Equal(int32(4)))
				g.Expect(d.Status.Services["prefill"].ReadyReplicas).To(Equal(int32(4)))
				g.Expect(meta.IsStatusConditionTrue(d.Status.Conditions, v1alpha1.ConditionAvailable)).To(BeTrue())
			}, 3*time.Second, 100*time.Millisecond).Should(Succeed())

			By("the next rollout drains and deletes it, never running more than R + maxSurge prefill replicas")
			update(ns, "adopt", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
			var most int32
			Eventually(func(g Gomega) {
				_, err := env.Play(ctx, ns, "adopt", -1)
				g.Expect(err).NotTo(HaveOccurred())
				var prefill int32
				gone := true
				for _, d := range deploymentsInNamespace(ns) {
					if metav1IsControlledByName(&d, "adopt") && (d.Name == victim.Name || d.Labels[v1alpha1.LabelService] == "prefill") {
						prefill += ptr.Deref(d.Spec.Replicas, 1)
						gone = gone && d.Name != victim.Name
					}
				}
				most = max(most, prefill)
				g.Expect(gone).To(BeTrue(), "%s is still there", victim.Name)
			}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
			Expect(most).To(BeNumerically("<=", 5), "prefill replicas over every Deployment the DGD controls")
		})
	}
})

func metav1IsControlledByName(d *appsv1.Deployment, dgd string) bool {
	for _, r := range d.OwnerReferences {
		if ptr.Deref(r.Controller, false) && r.Kind == "DynamoGraphDeployment" && r.Name == dgd {
			return true
		}
	}
	return false
}
