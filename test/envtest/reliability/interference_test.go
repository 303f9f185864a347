package reliability_test

import (
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/revisions"
	"github.com/dgd-rollout/operator/test/harness"
)

// Someone edits the operator's objects by hand, while the operator's writes keep
// failing at the suite's rate.

// workerDeployment returns the Deployment of service at hash in a snapshot.
func workerDeployment(s harness.Snapshot, service, hash string) appsv1.Deployment {
	GinkgoHelper()
	for _, d := range s.All {
		if d.Labels[v1alpha1.LabelService] == service && d.Labels[v1alpha1.LabelWorkerHash] == hash {
			return d
		}
	}
	Fail("no Deployment of " + service + "@" + hash)
	return appsv1.Deployment{}
}

// scaleByHand sets a Deployment's replicas as `kubectl scale` would.
func scaleByHand(ns, name string, replicas int32) {
	GinkgoHelper()
	Eventually(func() error {
		d := getDeployment(ns, name)
		d.Spec.Replicas = ptr.To(replicas)
		return env.Client.Update(ctx, d)
	}).Should(Succeed())
}

func uids(ds []appsv1.Deployment) map[string]types.UID {
	out := map[string]types.UID{}
	for _, d := range ds {
		out[d.Name] = d.UID
	}
	return out
}

var _ = Describe("manual interference: scaling a worker Deployment by hand", func() {
	for _, tc := range []struct {
		name string
		to   int32
	}{{"up, above the surge budget", 7}, {"down, below the availability floor", 1}} {
		It("restores the planned count at steady state after a scale "+tc.name, func() {
			withFaults(func() {
				ns := newNamespace()
				s := deploy(harness.NewDGD(ns, "scale").Disagg(4, 2, "vllm:v1").Obj())
				prefill := workerDeployment(s, "prefill", s.Hashes()[0]).Name
				sw := watchSurge(ns, "scale")
				scaleByHand(ns, prefill, tc.to)
				steps, err := drive(ns, "scale", -1, maxSteps, func(s harness.Snapshot) bool {
					return s.Completed() && s.DGD.Status.ReadyReplicas == 6 && s.Replicas()["prefill@"+s.Hashes()[0]] == 4
				})
				Expect(err).NotTo(HaveOccurred())
				last := steps[len(steps)-1]
				Expect(last.Hashes()).To(Equal(s.Hashes()), "a scale by hand must not start a rollout")
				Expect(uids(last.All)).To(Equal(uids(s.All)), "nothing is recreated")
				By("the operator went straight back to 4: never below the floor (3), never above R+surge (5) but for the human's value")
				_, _ = sw.stop()
				Expect(slices.Compact(sw.specsOf(prefill))).To(Equal([]int32{4, tc.to, 4}),
					"as listed, then one write by hand, then one by the operator straight back to 4")
			})
		})
	}

	It("rolls on to completion after the old pool is scaled up and the new one down by hand mid-rollout", func() {
		withFaults(func() {
			ns := newNamespace()
			deploy(harness.NewDGD(ns, "mid").Disagg(8, 4, "vllm:v1").Rollout("1", "0").Obj())
			update(ns, "mid", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
			steps, err := drive(ns, "mid", -1, maxSteps, func(s harness.Snapshot) bool { return s.Pool(s.UpdateHash())["prefill"] >= 3 })
			Expect(err).NotTo(HaveOccurred())
			s := steps[len(steps)-1]
			old := s.Hashes()[0]
			if old == s.UpdateHash() {
				old = s.Hashes()[1]
			}
			oldPrefill, newPrefill := workerDeployment(s, "prefill", old), workerDeployment(s, "prefill", s.UpdateHash())
			scaleByHand(ns, oldPrefill.Name, *oldPrefill.Spec.Replicas+2)
			scaleByHand(ns, newPrefill.Name, *newPrefill.Spec.Replicas-1)
			steps, err = drive(ns, "mid", -1, maxSteps, harness.CompletedAt(2))
			Expect(err).NotTo(HaveOccurred())
			Expect(steps[len(steps)-1].Hashes()).To(Equal([]string{s.UpdateHash()}))
			Eventually(func() int { return len(deploymentsInNamespace(ns)) }).Should(Equal(3))
		})
	})
})

var _ = Describe("manual interference: deleting a worker Deployment of the update revision", func() {
	It("recreates it mid-rollout and completes the rollout", func() {
		withFaults(func() {
			ns := newNamespace()
			deploy(harness.NewDGD(ns, "del").Disagg(8, 4, "vllm:v1").Rollout("1", "0").Obj())
			update(ns, "del", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
			steps, err := drive(ns, "del", -1, maxSteps, func(s harness.Snapshot) bool { return s.PoolSize(s.UpdateHash()) >= 4 })
			Expect(err).NotTo(HaveOccurred())
			s := steps[len(steps)-1]
			victim := workerDeployment(s, "prefill", s.UpdateHash())
			Expect(env.Client.Delete(ctx, &victim)).To(Succeed())
			By("it comes back as a new object")
			Eventually(func() types.UID {
				var d appsv1.Deployment
				_ = env.Client.Get(ctx, client.ObjectKeyFromObject(&victim), &d)
				return d.UID
			}, 30*time.Second).ShouldNot(BeElementOf(types.UID(""), victim.UID))
			steps, err = drive(ns, "del", -1, maxSteps, harness.CompletedAt(2))
			Expect(err).NotTo(HaveOccurred())
			last := steps[len(steps)-1]
			Expect(last.Hashes()).To(Equal([]string{s.UpdateHash()}))
			Expect(last.DGD.Status.UpdateRevisionNumber).To(Equal(int64(2)), "no new revision")
			Eventually(func() int { return len(deploymentsInNamespace(ns)) }).Should(Equal(3))
			Expect(controllerRevisions(ns)).To(HaveLen(2))
		})
	})

	It("recreates it at steady state at full size", func() {
		withFaults(func() {
			ns := newNamespace()
			s := deploy(harness.NewDGD(ns, "del2").Disagg(4, 2, "vllm:v1").Obj())
			victim := workerDeployment(s, "decode", s.Hashes()[0])
			Expect(env.Client.Delete(ctx, &victim)).To(Succeed())
			steps, err := drive(ns, "del2", -1, maxSteps, func(s harness.Snapshot) bool { return s.Completed() && s.DGD.Status.ReadyReplicas == 6 })
			Expect(err).NotTo(HaveOccurred())
			last := steps[len(steps)-1]
			Expect(last.Replicas()).To(Equal(s.Replicas()))
			Expect(workerDeployment(last, "decode", s.Hashes()[0]).UID).NotTo(Equal(victim.UID))
			Expect(last.DGD.Status.UpdateRevisionNumber).To(Equal(int64(1)))
		})
	})
})

var _ = Describe("manual interference: deleting a ControllerRevision", func() {
	revisionOf := func(ns string, number int64) *appsv1.ControllerRevision {
		GinkgoHelper()
		for _, r := range controllerRevisions(ns) {
			if r.Revision == number {
				return r.DeepCopy()
			}
		}
		Fail(fmt.Sprintf("no revision %d", number))
		return nil
	}
	// recreated waits until a revision of that name exists again with another UID and
	// returns it.
	recreated := func(old *appsv1.ControllerRevision) *appsv1.ControllerRevision {
		GinkgoHelper()
		var now appsv1.ControllerRevision
		Eventually(func() types.UID {
			now = appsv1.ControllerRevision{}
			_ = env.Client.Get(ctx, client.ObjectKeyFromObject(old), &now)
			return now.UID
		}, 30*time.Second).ShouldNot(BeElementOf(types.UID(""), old.UID))
		return &now
	}

	It("recreates the update revision at steady state: same name and number, no rollout, nothing left behind", func() {
		withFaults(func() {
			ns := newNamespace()
			deploy(harness.NewDGD(ns, "cr").Disagg(4, 2, "vllm:v1").Obj())
			update(ns, "cr", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
			steps, err := drive(ns, "cr", -1, maxSteps, harness.CompletedAt(2))
			Expect(err).NotTo(HaveOccurred())
			before := steps[len(steps)-1]
			two := revisionOf(ns, 2)
			Expect(env.Client.Delete(ctx, two)).To(Succeed())
			again := recreated(two)
			Expect(again.Revision).To(Equal(int64(2)))
			Expect(revisions.Equal(again, two)).To(BeTrue(), "the same worker template")
			after, err := waitSettled(ns, "cr")
			Expect(err).NotTo(HaveOccurred())
			Expect(after.DGD.Status.ObservedGeneration).To(Equal(after.DGD.Generation))
			Expect(after.DGD.Status.UpdateRevision).To(Equal(before.DGD.Status.UpdateRevision))
			Expect(after.DGD.Status.UpdateRevisionNumber).To(Equal(int64(2)))
			Expect(after.DGD.Status.RollingUpdate.Phase).To(Equal(v1alpha1.RolloutCompleted))
			Expect(after.DGD.Status.RollingUpdate.StartTime).To(Equal(before.DGD.Status.RollingUpdate.StartTime), "no rollout restarted")
			Expect(uids(after.All)).To(Equal(uids(before.All)), "no workload recreated")
			Expect(after.Replicas()).To(Equal(before.Replicas()))
			Expect(controllerRevisions(ns)).To(HaveLen(2))
		})
	})

	It("recreates the update revision mid-rollout and carries on where it was", func() {
		withFaults(func() {
			ns := newNamespace()
			deploy(harness.NewDGD(ns, "cr2").Disagg(8, 4, "vllm:v1").Rollout("1", "0").Obj())
			update(ns, "cr2", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
			steps, err := drive(ns, "cr2", -1, maxSteps, func(s harness.Snapshot) bool { return s.PoolSize(s.UpdateHash()) >= 4 })
			Expect(err).NotTo(HaveOccurred())
			mid := steps[len(steps)-1]
			start := mid.DGD.Status.RollingUpdate.StartTime
			two := revisionOf(ns, 2)
			Expect(env.Client.Delete(ctx, two)).To(Succeed())
			Expect(recreated(two).Revision).To(Equal(int64(2)))
			steps, err = drive(ns, "cr2", -1, maxSteps, harness.CompletedAt(2))
			Expect(err).NotTo(HaveOccurred())
			By("the new pool never shrank and the old one never grew: the rollout was not restarted")
			old := mid.Hashes()[0]
			if old == mid.UpdateHash() {
				old = mid.Hashes()[1]
			}
			prev := mid
			for _, st := range steps {
				Expect(st.PoolSize(mid.UpdateHash())).To(BeNumerically(">=", prev.PoolSize(mid.UpdateHash())), "%v", st.Replicas())
				Expect(st.PoolSize(old)).To(BeNumerically("<=", prev.PoolSize(old)), "%v", st.Replicas())
				prev = st
			}
			Expect(steps[len(steps)-1].DGD.Status.RollingUpdate.StartTime).To(Equal(start))
			Expect(controllerRevisions(ns)).To(HaveLen(2))
		})
	})

	It("completes a rollout whose old (current) revision was deleted mid-way; that revision is gone for good", func() {
		withFaults(func() {
			ns := newNamespace()
			deploy(harness.NewDGD(ns, "cr3").Disagg(8, 4, "vllm:v1").Rollout("1", "0").Obj())
			update(ns, "cr3", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
			steps, err := drive(ns, "cr3", -1, maxSteps, func(s harness.Snapshot) bool { return s.PoolSize(s.UpdateHash()) >= 3 })
			Expect(err).NotTo(HaveOccurred())
			mid := steps[len(steps)-1]
			one := revisionOf(ns, 1)
			Expect(env.Client.Delete(ctx, one)).To(Succeed())
			By("as StatefulSet does, status.currentRevision falls back to the update revision once the current one is lost")
			Eventually(func(g Gomega) {
				var d v1alpha1.DynamoGraphDeployment
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cr3"}, &d)).To(Succeed())
				g.Expect(d.Status.CurrentRevision).To(Equal(d.Status.UpdateRevision))
			}, 30*time.Second).Should(Succeed())
			steps, err = drive(ns, "cr3", -1, maxSteps, harness.CompletedAt(2))
			Expect(err).NotTo(HaveOccurred())
			By("the old pool drained like any old pool (invariants checked at every step by drive)")
			Expect(steps[len(steps)-1].Hashes()).To(Equal([]string{mid.UpdateHash()}))
			By("its template was only in the ControllerRevision: it cannot be recreated, and is not")
			Expect(controllerRevisions(ns)).To(HaveLen(1))
		})
	})
})

var _ = Describe("manual interference: stripping the operator's labels from a worker Deployment", func() {
	for _, onlyHash := range []bool{false, true} {
		what := "every label and annotation"
		if onlyHash {
			what = "the worker-hash label"
		}
		It("neither deletes nor duplicates it when "+what+" is stripped", func() {
			withFaults(func() {
				ns := newNamespace()
				s := deploy(harness.NewDGD(ns, "strip").Disagg(4, 2, "vllm:v1").Obj())
				victim := workerDeployment(s, "prefill", s.Hashes()[0])
				stripLabels(ns, victim.Name, onlyHash)
				// No settled state to wait for: the status no longer matches what the harness
				// lists by label. Give the operator time to act on the change.
				Consistently(func() []string {
					var names []string
					for _, d := range deploymentsInNamespace(ns) {
						names = append(names, d.Name)
					}
					return names
				}, 3*time.Second).Should(ConsistOf(victim.Name, "strip-frontend", workerDeployment(s, "decode", s.Hashes()[0]).Name))
				now := getDeployment(ns, victim.Name)
				Expect(now.UID).To(Equal(victim.UID), "the stripped Deployment was deleted")
				Expect(now.Spec.Replicas).To(Equal(victim.Spec.Replicas))
			})
		})
	}
})
