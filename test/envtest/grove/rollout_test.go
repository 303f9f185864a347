package grove_test

import (
	"path/filepath"
	"slices"
	"time"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/revisions"
	"github.com/dgd-rollout/operator/test/harness"
)

// completed is Completed with the drained revisions' PodCliqueSets gone: the stable
// one and the update revision's are left.
func completed(s harness.Snapshot) bool {
	return s.Completed() && len(s.PCS) == len(s.Hashes())+1
}

func onGrove(d *harness.DGD) *harness.DGD { return d.Backend(v1alpha1.BackendGrove) }

// revisionPCS is the live PodCliqueSet of a worker revision (its hash label), or nil:
// PodCliqueSets take the first free name of `{dgd}`, `{dgd}-1`, ... and say what they
// hold in their labels.
func revisionPCS(s harness.Snapshot, hash string) *grovev1.PodCliqueSet {
	for i := range s.PCS {
		if p := &s.PCS[i]; p.Labels[v1alpha1.LabelWorkerHash] == hash && p.DeletionTimestamp.IsZero() {
			return p
		}
	}
	return nil
}

func pcsNamed(s harness.Snapshot, name string) *grovev1.PodCliqueSet {
	for i := range s.PCS {
		if s.PCS[i].Name == name {
			return &s.PCS[i]
		}
	}
	return nil
}

var _ = Describe("first deploy on Grove", func() {
	It("creates a stable PodCliqueSet for the frontend and one per worker revision, every defaulted field set", func() {
		ns := newNamespace()
		s := deploy(onGrove(harness.NewDGD(ns, "first").Disagg(4, 2, "vllm:v1").Multinode("decode", 4)).Obj())
		h := s.Hashes()[0]
		Expect(s.PCS).To(HaveLen(2))
		rev := revisionPCS(s, h)
		Expect(rev).NotTo(BeNil())
		Expect(rev.Name).To(Equal("first"), "the first revision's PodCliqueSet is named after the DGD alone, as Dynamo names its one")
		stable := stablePCS(s, "Frontend")
		Expect(stable).NotTo(BeNil())
		Expect(stable.Name).To(Equal("first-1"), "stable templates take names from {dgd}-1 on")
		Expect(names(stable.Spec.Template)).To(Equal("frontend"), "the frontend has a PodCliqueSet of its own")
		Expect(rev.Spec.Replicas).To(Equal(int32(1)))
		Expect(rev.Spec.UpdateStrategy.Type).To(Equal(grovev1.RollingRecreateStrategy))
		Expect(rev.Spec.Template.TerminationDelay).NotTo(BeNil())
		Expect(rev.Spec.Template.StartupType).NotTo(BeNil())
		Expect(rev.Spec.Template.HeadlessServiceConfig).NotTo(BeNil())
		Expect(names(rev.Spec.Template)).To(Equal("decode-ldr decode-wkr decode[decode-ldr,decode-wkr] prefill"))
		for _, c := range rev.Spec.Template.Cliques {
			Expect(c.Spec.MinAvailable).NotTo(BeNil(), c.Name)
			Expect(c.Spec.RoleName).To(Equal(c.Name))
			Expect(c.Spec.PodSpec.RestartPolicy).NotTo(BeEmpty())
			Expect(c.Spec.PodSpec.TerminationGracePeriodSeconds).NotTo(BeNil())
			env := map[string]string{}
			for _, e := range c.Spec.PodSpec.Containers[0].Env {
				env[e.Name] = e.Value
			}
			Expect(env[v1alpha1.EnvDynNamespaceWorkerSuffix]).To(Equal(h))
			Expect(env).NotTo(HaveKey(HavePrefix("GROVE_")), "our env must not clash with Grove's GROVE_* variables")
		}
		var w int32
		for _, c := range rev.Spec.Template.Cliques {
			if c.Name == "decode-wkr" {
				w = c.Spec.Replicas
			}
		}
		Expect(w).To(Equal(int32(3)), "a decode gang is a leader and nodeCount-1 workers")
		Expect(s.DGD.Status.Services["decode"].WorkloadKind).To(Equal("PodCliqueSet"))
		Expect(s.DGD.Status.Services["decode"].Workloads[0].Name).To(Equal("first-0-decode"))
	})
})

var _ = Describe("rollouts on Grove", func() {
	It("rolls a multinode disagg graph (prefill 4x2, decode 2x4 on PCSGs), one gang ready per step", func() {
		ns := newNamespace()
		old := deploy(onGrove(harness.NewDGD(ns, "gangs").Disagg(4, 2, "vllm:v1").Multinode("prefill", 2).Multinode("decode", 4)).Obj()).Hashes()[0]
		update(ns, "gangs", harness.Image("vllm:v2"))
		steps, err := env.Drive(ctx, ns, "gangs", 1, 60, completed)
		Expect(err).NotTo(HaveOccurred())
		Expect(slices.ContainsFunc(steps, func(s harness.Snapshot) bool { return len(s.Hashes()) == 2 })).To(BeTrue())
		last := steps[len(steps)-1]
		Expect(last.Hashes()).NotTo(ContainElement(old))
		Expect(revisionPCS(last, old)).To(BeNil(), "the drained revision's PodCliqueSet is deleted whole")
		Expect(last.Pool(last.UpdateHash())).To(Equal(map[string]int32{"prefill": 4, "decode": 2}))
		By("the frontend discovers the new generation only, and every gang formed")
		o := observers[ns]
		want := render.EffectiveNamespace(&last.DGD, true, last.UpdateHash())
		Eventually(func(g Gomega) {
			fv, err := o.Frontend(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			var ready []string
			for _, gen := range fv.ReadyGenerations() {
				ready = append(ready, gen.Namespace)
			}
			g.Expect(ready).To(Equal([]string{want}))
		}).Should(Succeed())
		Expect(o.Stats().Gangs).To(BeNumerically(">=", 12), "6 gangs of each revision were checked whole")
		Expect(o.Stats().ReadyGenerations).To(ContainElements(render.EffectiveNamespace(&last.DGD, true, old), want))
	})

	It("rolls single-node P=4/D=2 standalone cliques through their scale subresource and keeps the template in step", func() {
		ns := newNamespace()
		deploy(onGrove(harness.NewDGD(ns, "cliques").Disagg(4, 2, "vllm:v1")).Obj())
		update(ns, "cliques", harness.Image("vllm:v2"))
		steps, err := env.Drive(ctx, ns, "cliques", 1, 60, completed)
		Expect(err).NotTo(HaveOccurred())
		last := steps[len(steps)-1]
		rev := revisionPCS(last, last.UpdateHash())
		for _, c := range rev.Spec.Template.Cliques {
			Expect(c.Spec.Replicas).To(Equal(map[string]int32{"prefill": 4, "decode": 2}[c.Name]), "template kept in step for "+c.Name)
		}
	})

	It("holds at partition 50% and completes at 0", func() {
		ns := newNamespace()
		old := deploy(onGrove(harness.NewDGD(ns, "canary").Disagg(4, 2, "vllm:v1").Multinode("decode", 2)).Partition("50%").Obj()).Hashes()[0]
		update(ns, "canary", harness.Image("vllm:v2"))
		steps, err := env.Drive(ctx, ns, "canary", -1, 20, func(s harness.Snapshot) bool {
			ru := s.DGD.Status.RollingUpdate
			return ru != nil && ru.Reason == "Partitioned"
		})
		Expect(err).NotTo(HaveOccurred())
		held := steps[len(steps)-1]
		Expect(held.Pool(old)).To(Equal(map[string]int32{"prefill": 2, "decode": 1}))
		Expect(held.Pool(held.UpdateHash())).To(Equal(map[string]int32{"prefill": 2, "decode": 1}))
		update(ns, "canary", func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Partition = nil })
		_, err = env.Drive(ctx, ns, "canary", -1, 20, completed)
		Expect(err).NotTo(HaveOccurred())
	})

	It("aborts a canary held at 50%: every worker back on the stable revision, the canary's PodCliqueSet deleted whole", func() {
		ns := newNamespace()
		old := deploy(onGrove(harness.NewDGD(ns, "abort").Disagg(4, 2, "vllm:v1").Multinode("decode", 2)).Partition("50%").Obj()).Hashes()[0]
		update(ns, "abort", harness.Image("vllm:v2"))
		_, err := env.Drive(ctx, ns, "abort", -1, 20, harness.PhaseIs(v1alpha1.RolloutPaused, v1alpha1.ReasonPartitioned))
		Expect(err).NotTo(HaveOccurred())
		update(ns, "abort", func(d *v1alpha1.DynamoGraphDeployment) {
			d.Annotations = map[string]string{v1alpha1.AnnotationAbort: "2/1"}
		})
		steps, err := env.Drive(ctx, ns, "abort", -1, 20, func(s harness.Snapshot) bool {
			return harness.PhaseIs(v1alpha1.RolloutAborted, v1alpha1.ReasonRolloutAborted)(s) && s.DGD.Status.RollingUpdate.EndTime != nil && len(s.PCS) == 2
		})
		Expect(err).NotTo(HaveOccurred())
		s := steps[len(steps)-1]
		Expect(s.Hashes()).To(Equal([]string{old}))
		Expect(s.Pool(old)).To(Equal(map[string]int32{"prefill": 4, "decode": 2}))
	})

	It("pauses, recreates, retargets A→B→C and rolls back", func() {
		ns := newNamespace()
		a := deploy(onGrove(harness.NewDGD(ns, "abc").Disagg(8, 4, "vllm:a")).Rollout("1", "0").Obj()).Hashes()[0]
		update(ns, "abc", harness.Image("vllm:b"))
		steps, err := env.Drive(ctx, ns, "abc", -1, 20, func(s harness.Snapshot) bool { return s.PoolSize(s.UpdateHash()) >= 3 })
		Expect(err).NotTo(HaveOccurred())
		b := steps[len(steps)-1].UpdateHash()
		By("paused: readiness moves nothing")
		update(ns, "abc", func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Paused = true })
		before, err := env.WaitSettled(ctx, ns, "abc")
		Expect(err).NotTo(HaveOccurred())
		_, err = env.Play(ctx, ns, "abc", -1)
		Expect(err).NotTo(HaveOccurred())
		held, err := env.WaitSettled(ctx, ns, "abc")
		Expect(err).NotTo(HaveOccurred())
		Expect(held.Replicas()).To(Equal(before.Replicas()))
		By("C arrives: B drains before A")
		update(ns, "abc", func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Paused = false; harness.SetImage(d, "vllm:c") })
		steps, err = env.Drive(ctx, ns, "abc", -1, 60, completed)
		Expect(err).NotTo(HaveOccurred())
		for i := 1; i < len(steps); i++ {
			if steps[i].PoolSize(a) < steps[i-1].PoolSize(a) {
				Expect(steps[i].PoolSize(b)).To(BeZero(), "A shrank while B had replicas")
			}
		}
		By("rollback to A, renumbered 4")
		var revs appsv1.ControllerRevisionList
		Expect(env.Client.List(ctx, &revs, client.InNamespace(ns))).To(Succeed())
		one := revisions.FindRevision(ptrs(revs.Items), 1)
		Expect(one).NotTo(BeNil())
		update(ns, "abc", func(d *v1alpha1.DynamoGraphDeployment) {
			spec, err := revisions.Restore(d, one)
			Expect(err).NotTo(HaveOccurred())
			d.Spec = *spec
		})
		steps, err = env.Drive(ctx, ns, "abc", -1, 60, func(s harness.Snapshot) bool { return completed(s) && s.DGD.Status.UpdateRevisionNumber == 4 })
		Expect(err).NotTo(HaveOccurred())
		Expect(steps[len(steps)-1].Hashes()).To(Equal([]string{a}))
		By("Recreate")
		update(ns, "abc", func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Rollout.Strategy = v1alpha1.RecreateStrategy
			harness.SetImage(d, "vllm:d")
		})
		steps, err = env.Drive(ctx, ns, "abc", -1, 20, func(s harness.Snapshot) bool { return completed(s) && s.DGD.Status.UpdateRevisionNumber == 5 })
		Expect(err).NotTo(HaveOccurred())
		for _, st := range steps {
			Expect(len(st.Hashes()) <= 1 || st.PoolSize(a) == 0 || st.PoolSize(st.UpdateHash()) == 0).To(BeTrue())
		}
	})

	It("updates the frontend without a worker rollout", func() {
		ns := newNamespace()
		first := deploy(onGrove(harness.NewDGD(ns, "fe").Disagg(2, 1, "vllm:v1")).Obj())
		update(ns, "fe", func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = "frontend:v2"
		})
		steps, err := env.Drive(ctx, ns, "fe", -1, 20, func(s harness.Snapshot) bool { return frontendOn(s, "frontend:v2") })
		Expect(err).NotTo(HaveOccurred())
		s := steps[len(steps)-1]
		Expect(s.Replicas()).To(Equal(first.Replicas()))
		Expect(s.DGD.Status.UpdateRevisionNumber).To(Equal(int64(2)), "the whole graph is a revision")
		Expect(s.DGD.Status.UpdateWorkerHash).To(Equal(first.UpdateHash()), "a frontend change rolls no worker")
		Expect(s.Hashes()).To(Equal(first.Hashes()))
	})
})

func ptrs(items []appsv1.ControllerRevision) []*appsv1.ControllerRevision {
	out := make([]*appsv1.ControllerRevision, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

var _ = Describe("manual interference on Grove", func() {
	It("finds a worker PodCliqueSet stripped of its labels and annotations by its owner, restores the labels and rolls on", func() {
		ns := newNamespace()
		s := deploy(onGrove(harness.NewDGD(ns, "strip").Disagg(4, 2, "vllm:v1").Multinode("decode", 2)).Obj())
		old := s.Hashes()[0]
		victim := revisionPCS(s, old)
		Expect(victim).NotTo(BeNil())
		Eventually(func() error {
			var p grovev1.PodCliqueSet
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(victim), &p); err != nil {
				return err
			}
			p.Labels, p.Annotations = nil, nil
			return env.Client.Update(ctx, &p)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			var p grovev1.PodCliqueSet
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(victim), &p)).To(Succeed())
			g.Expect(p.UID).To(Equal(victim.UID), "neither deleted nor replaced")
			g.Expect(p.Labels).To(HaveKeyWithValue(v1alpha1.LabelGraph, "strip"))
			g.Expect(p.Labels).To(HaveKeyWithValue(v1alpha1.LabelWorkerHash, old))
		}, 10*time.Second).Should(Succeed())
		By("its services are still known without the placement annotation: the rollout drains it")
		update(ns, "strip", harness.Image("vllm:v2"))
		steps, err := env.Drive(ctx, ns, "strip", -1, 20, completed)
		Expect(err).NotTo(HaveOccurred())
		last := steps[len(steps)-1]
		Expect(pcsNamed(last, victim.Name)).To(BeNil())
		Expect(last.Pool(last.UpdateHash())).To(Equal(map[string]int32{"prefill": 4, "decode": 2}))
	})
})

var _ = Describe("a v1beta1 DGD on Grove", func() {
	It("deploys config/samples/v1beta1/disagg-grove.yaml and rolls a new image written in v1beta1", func() {
		ns := newNamespace()
		b, err := harness.ReadBeta(filepath.Join(harness.RepoRoot(), "config", "samples", "v1beta1", "disagg-grove.yaml"))
		Expect(err).NotTo(HaveOccurred())
		b.Namespace = ns
		Expect(env.Client.Create(ctx, b)).To(Succeed())
		_, err = env.Drive(ctx, ns, b.Name, -1, 10, completed)
		Expect(err).NotTo(HaveOccurred())
		Expect(harness.UpdateBeta(ctx, env.Client, ns, b.Name, harness.BetaImage("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.1"))).To(Succeed())
		steps, err := env.Drive(ctx, ns, b.Name, 1, 40, func(s harness.Snapshot) bool { return completed(s) && s.DGD.Status.UpdateRevisionNumber == 2 })
		Expect(err).NotTo(HaveOccurred())
		Expect(steps[len(steps)-1].PCS).To(HaveLen(2), "the stable frontend and revision 2's PodCliqueSet")
	})
})
