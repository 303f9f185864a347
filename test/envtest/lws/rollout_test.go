package lws_test

import (
	"maps"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/revisions"
	"github.com/dgd-rollout/operator/test/harness"
)

// multinodeDisagg is ROLLOUT.md's headline shape: prefill 4 gangs x 2 nodes, decode 2
// gangs x 4 nodes.
func multinodeDisagg(ns, name string) *harness.DGD {
	return harness.NewDGD(ns, name).Disagg(4, 2, "vllm:v1").Multinode("prefill", 2).Multinode("decode", 4)
}

var _ = Describe("first deploy", func() {
	It("creates one LeaderWorkerSet per multinode worker with every defaulted field set and the frontend as a Deployment", func() {
		ns := newNamespace()
		s := deploy(multinodeDisagg(ns, "first").Obj())
		Expect(s.LWS).To(HaveLen(2))
		Expect(s.Stable).To(HaveLen(1), "the single-node frontend stays a Deployment under Auto")
		h := s.Hashes()[0]
		for _, l := range s.LWS {
			svc := l.Labels[v1alpha1.LabelService]
			want := map[string]int32{"prefill": 2, "decode": 4}[svc]
			Expect(*l.Spec.LeaderWorkerTemplate.Size).To(Equal(want), l.Name)
			Expect(l.Name).To(Equal("first-" + svc + "-" + h))
			Expect(l.Spec.StartupPolicy).To(Equal(lwsv1.LeaderCreatedStartupPolicy))
			Expect(l.Spec.RolloutStrategy.Type).To(Equal(lwsv1.RollingUpdateStrategyType))
			Expect(*l.Spec.RolloutStrategy.RollingUpdateConfiguration.Partition).To(BeZero())
			Expect(l.Spec.RolloutStrategy.RollingUpdateConfiguration.MaxUnavailable).To(Equal(intstr.FromInt32(1)))
			Expect(*l.Spec.NetworkConfig.SubdomainPolicy).To(Equal(lwsv1.SubdomainShared))
			Expect(l.Spec.LeaderWorkerTemplate.RestartPolicy).To(Equal(lwsv1.RecreateGroupOnPodRestart))
			for _, t := range []struct{ env []string }{{envOf(l.Spec.LeaderWorkerTemplate.LeaderTemplate.Spec.Containers[0].Env)}, {envOf(l.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec.Containers[0].Env)}} {
				Expect(t.env).To(ContainElements(v1alpha1.EnvDynNamespace+"="+ns+"-first", v1alpha1.EnvDynNamespaceWorkerSuffix+"="+h))
			}
			Expect(metav1IsControlledBy(&l, &s.DGD)).To(BeTrue())
		}
		Expect(s.DGD.Status.Services["prefill"].WorkloadKind).To(Equal("LeaderWorkerSet"))
	})
})

var _ = Describe("multinode disaggregated rollout", func() {
	It("rolls prefill 4x2 / decode 2x4 to a new image, one gang ready per step, invariants at every step", func() {
		ns := newNamespace()
		old := deploy(multinodeDisagg(ns, "gangs").Obj()).Hashes()[0]
		update(ns, "gangs", harness.Image("vllm:v2"))
		steps, err := env.Drive(ctx, ns, "gangs", 1, 60, harness.Snapshot.Completed)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(steps)).To(BeNumerically(">=", 3))
		Expect(slices.ContainsFunc(steps, func(s harness.Snapshot) bool { return len(s.Hashes()) == 2 })).To(BeTrue())
		last := steps[len(steps)-1]
		Expect(last.Hashes()).NotTo(ContainElement(old))
		Expect(last.Pool(last.UpdateHash())).To(Equal(map[string]int32{"prefill": 4, "decode": 2}))
		By("the LWS template never changed after creation: each revision is its own LWS")
		for _, l := range last.LWS {
			Expect(l.Generation).To(BeNumerically(">=", 1))
			Expect(l.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec.Containers[0].Image).To(Equal("vllm:v2"))
		}
	})

	It("moves both roles in lockstep when decode gangs become ready before prefill gangs (maxSurge 1, maxUnavailable 0)", func() {
		ns := newNamespace()
		deploy(multinodeDisagg(ns, "lockstep").Rollout("1", "0").Obj())
		update(ns, "lockstep", harness.Image("vllm:v2"))
		// |p/4 - d/2| <= 1/4 in every revision; ROLLOUT.md's rule allows 1/2, which the
		// planner would reach by draining an old decode gang as soon as a new one is ready.
		inWindow := func(s harness.Snapshot) {
			for _, h := range s.Hashes() {
				p := s.Pool(h)
				Expect(max(4*p["decode"]-2*p["prefill"], 2*p["prefill"]-4*p["decode"])).To(BeNumerically("<=", 2),
					"revision %s holds prefill %d/4, decode %d/2", h, p["prefill"], p["decode"])
			}
		}
		waits := 0
		for i := 0; ; i++ {
			Expect(i).To(BeNumerically("<", 20), "not completed")
			s, err := env.WaitSettled(ctx, ns, "lockstep")
			Expect(err).NotTo(HaveOccurred())
			inWindow(s)
			if s.Completed() {
				break
			}
			_, err = env.PlayLeaderWorkerSets(ctx, ns, "lockstep", -1, "decode")
			Expect(err).NotTo(HaveOccurred())
			mid, err := env.WaitSettled(ctx, ns, "lockstep")
			Expect(err).NotTo(HaveOccurred())
			inWindow(mid)
			if maps.Equal(mid.Replicas(), s.Replicas()) {
				waits++ // the operator saw the new decode gangs ready and moved nothing
			}
			_, err = env.PlayLeaderWorkerSets(ctx, ns, "lockstep", -1, "prefill")
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(waits).To(BeNumerically(">=", 3), "decode ready alone must leave the rollout waiting for prefill")
	})

	It("counts a gang only when LWS reports the whole group ready", func() {
		ns := newNamespace()
		obj := multinodeDisagg(ns, "gang-ready").Rollout("1", "0").Obj()
		old := deploy(obj).Hashes()[0]
		update(ns, "gang-ready", harness.Image("vllm:v2"))
		s, err := env.WaitSettled(ctx, ns, "gang-ready")
		Expect(err).NotTo(HaveOccurred())
		Expect(s.PoolSize(s.UpdateHash())).To(BeNumerically(">", 0))
		By("LWS reports the new groups existing but not ready: no old gang may go")
		for _, l := range s.LWS {
			if l.Labels[v1alpha1.LabelWorkerHash] == s.UpdateHash() {
				l.Status = lwsv1.LeaderWorkerSetStatus{ObservedGeneration: l.Generation, Replicas: *l.Spec.Replicas, ReadyReplicas: 0}
				Expect(env.Client.Status().Update(ctx, &l)).To(Succeed())
			}
		}
		again, err := env.WaitSettled(ctx, ns, "gang-ready")
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Pool(old)).To(Equal(map[string]int32{"prefill": 4, "decode": 2}))
		_, err = env.Drive(ctx, ns, "gang-ready", -1, 30, harness.Snapshot.Completed)
		Expect(err).NotTo(HaveOccurred())
	})

	It("rolls a graph mixing a single-node Deployment worker and multinode LWS workers as one rollout with one ratio", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "mixed").Disagg(4, 2, "vllm:v1").Multinode("decode", 4).Obj()
		s := deploy(obj)
		Expect(s.LWS).To(HaveLen(1))
		Expect(s.Workloads).To(HaveLen(2))
		update(ns, "mixed", harness.Image("vllm:v2"))
		_, err := env.Drive(ctx, ns, "mixed", 1, 60, harness.Snapshot.Completed)
		Expect(err).NotTo(HaveOccurred())
	})
})

var _ = Describe("partition, pause, Recreate, retarget and rollback on LeaderWorkerSets", func() {
	It("holds at partition 50% (2 prefill gangs + 1 decode gang old) and completes at 0", func() {
		ns := newNamespace()
		old := deploy(multinodeDisagg(ns, "canary").Partition("50%").Obj()).Hashes()[0]
		update(ns, "canary", harness.Image("vllm:v2"))
		steps, err := env.Drive(ctx, ns, "canary", -1, 20, harness.PhaseIs(v1alpha1.RolloutPaused, "Partitioned"))
		Expect(err).NotTo(HaveOccurred())
		held := steps[len(steps)-1]
		Expect(held.Pool(old)).To(Equal(map[string]int32{"prefill": 2, "decode": 1}))
		Expect(held.Pool(held.UpdateHash())).To(Equal(map[string]int32{"prefill": 2, "decode": 1}))
		update(ns, "canary", func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Partition = nil })
		_, err = env.Drive(ctx, ns, "canary", -1, 20, harness.Snapshot.Completed)
		Expect(err).NotTo(HaveOccurred())
	})

	It("aborts a canary held at 50%: every gang back on the stable revision, under the invariants", func() {
		ns := newNamespace()
		old := deploy(multinodeDisagg(ns, "abort").Partition("50%").Obj()).Hashes()[0]
		update(ns, "abort", harness.Image("vllm:v2"))
		_, err := env.Drive(ctx, ns, "abort", -1, 20, harness.PhaseIs(v1alpha1.RolloutPaused, "Partitioned"))
		Expect(err).NotTo(HaveOccurred())
		update(ns, "abort", func(d *v1alpha1.DynamoGraphDeployment) {
			d.Annotations = map[string]string{v1alpha1.AnnotationAbort: "2/1"}
		})
		steps, err := env.Drive(ctx, ns, "abort", -1, 20, func(s harness.Snapshot) bool {
			return harness.PhaseIs(v1alpha1.RolloutAborted, v1alpha1.ReasonRolloutAborted)(s) && s.DGD.Status.RollingUpdate.EndTime != nil
		})
		Expect(err).NotTo(HaveOccurred())
		s := steps[len(steps)-1]
		Expect(s.Hashes()).To(Equal([]string{old}))
		Expect(s.Pool(old)).To(Equal(map[string]int32{"prefill": 4, "decode": 2}))
	})

	It("pauses and resumes", func() {
		ns := newNamespace()
		deploy(multinodeDisagg(ns, "pause").Rollout("1", "0").Obj())
		update(ns, "pause", harness.Image("vllm:v2"))
		steps, err := env.Drive(ctx, ns, "pause", -1, 3, func(s harness.Snapshot) bool { return len(s.Hashes()) == 2 })
		Expect(err).NotTo(HaveOccurred())
		before := steps[len(steps)-1].Replicas()
		update(ns, "pause", func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Paused = true })
		_, err = env.WaitSettled(ctx, ns, "pause")
		Expect(err).NotTo(HaveOccurred())
		_, err = env.Play(ctx, ns, "pause", -1)
		Expect(err).NotTo(HaveOccurred())
		held, err := env.WaitSettled(ctx, ns, "pause")
		Expect(err).NotTo(HaveOccurred())
		Expect(held.Replicas()).To(Equal(before))
		update(ns, "pause", func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Paused = false })
		_, err = env.Drive(ctx, ns, "pause", -1, 30, harness.Snapshot.Completed)
		Expect(err).NotTo(HaveOccurred())
	})

	It("recreates: the new revision waits until the old gangs are gone", func() {
		ns := newNamespace()
		old := deploy(multinodeDisagg(ns, "recreate").Strategy(v1alpha1.RecreateStrategy).Obj()).Hashes()[0]
		update(ns, "recreate", harness.Image("vllm:v2"))
		s, err := env.WaitSettled(ctx, ns, "recreate")
		Expect(err).NotTo(HaveOccurred())
		Expect(s.PoolSize(old)).To(BeZero())
		Expect(s.PoolSize(s.UpdateHash())).To(BeZero())
		steps, err := env.Drive(ctx, ns, "recreate", -1, 10, harness.Snapshot.Completed)
		Expect(err).NotTo(HaveOccurred())
		for _, st := range steps {
			Expect(st.PoolSize(old) == 0 || st.PoolSize(st.UpdateHash()) == 0).To(BeTrue())
		}
	})

	It("retargets A→B→C and rolls back to A (renumbered 4)", func() {
		ns := newNamespace()
		a := deploy(multinodeDisagg(ns, "abc").Rollout("1", "0").Obj()).Hashes()[0]
		update(ns, "abc", harness.Image("vllm:b"))
		steps, err := env.Drive(ctx, ns, "abc", -1, 20, func(s harness.Snapshot) bool { return s.PoolSize(s.UpdateHash()) >= 2 })
		Expect(err).NotTo(HaveOccurred())
		b := steps[len(steps)-1].UpdateHash()
		update(ns, "abc", harness.Image("vllm:c"))
		steps, err = env.Drive(ctx, ns, "abc", -1, 60, harness.Snapshot.Completed)
		Expect(err).NotTo(HaveOccurred())
		for i := 1; i < len(steps); i++ {
			Expect(steps[i].PoolSize(b)).To(BeNumerically("<=", steps[i-1].PoolSize(b)))
			if steps[i].PoolSize(a) < steps[i-1].PoolSize(a) {
				Expect(steps[i].PoolSize(b)).To(BeZero(), "A shrank while B still had gangs")
			}
		}
		var revs appsv1.ControllerRevisionList
		Expect(env.Client.List(ctx, &revs, client.InNamespace(ns))).To(Succeed())
		var one *appsv1.ControllerRevision
		for i := range revs.Items {
			if revs.Items[i].Revision == 1 {
				one = &revs.Items[i]
			}
		}
		Expect(one).NotTo(BeNil())
		update(ns, "abc", func(d *v1alpha1.DynamoGraphDeployment) {
			spec, err := revisions.Restore(d, one)
			Expect(err).NotTo(HaveOccurred())
			d.Spec = *spec
		})
		steps, err = env.Drive(ctx, ns, "abc", -1, 30, harness.CompletedAt(4))
		Expect(err).NotTo(HaveOccurred())
		Expect(steps[len(steps)-1].Hashes()).To(Equal([]string{a}))
	})
})

func envOf(env []corev1EnvVar) []string {
	var out []string
	for _, e := range env {
		out = append(out, e.Name+"="+e.Value)
	}
	return out
}

func metav1IsControlledBy(obj, owner client.Object) bool {
	for _, r := range obj.GetOwnerReferences() {
		if ptr.Deref(r.Controller, false) && r.UID == owner.GetUID() && ptr.Deref(r.BlockOwnerDeletion, false) {
			return true
		}
	}
	return false
}
