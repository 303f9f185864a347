package e2e

import (
	"fmt"
	"time"

	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/revisions"
	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/harness"
)

// gpus gives every worker one nvidia.com/gpu, so pods land on the fake GPU nodes.
func gpus(d *v1alpha1.DynamoGraphDeployment) *v1alpha1.DynamoGraphDeployment {
	for _, name := range d.WorkerServiceNames() {
		d.Spec.Services[name].Resources = &v1alpha1.Resources{Limits: &v1alpha1.ResourceItem{GPU: "1"}}
	}
	return d
}

// addArgs appends args to a service's command line.
func addArgs(service string, args ...string) func(*v1alpha1.DynamoGraphDeployment) {
	return func(d *v1alpha1.DynamoGraphDeployment) {
		main := d.Spec.Services[service].ExtraPodSpec.MainContainer
		main.Args = append(main.Args, args...)
	}
}

func image(img string) func(*v1alpha1.DynamoGraphDeployment) {
	return func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, img) }
}

var _ = Describe("Deployment backend on the local control plane", func() {
	It("rolls an aggregated worker of 4 to a new image", func() {
		s := start(gpus(harness.NewDGD(newNamespace(), "agg").Service("worker", "worker", "", 4, "vllm:v1").Obj()))
		s.update(image("vllm:v2"))
		s.waitRolledOut(2)
		// Pods being terminated exist beyond the surge budget, as with a Deployment's own
		// rolling update: surge bounds the replicas set, which the watcher checks.
		Expect(s.w.Snapshot().MinReady["worker"]).To(BeNumerically(">=", 3), "maxUnavailable 25% of 4 is 1")
	})

	It("rolls disaggregated P=4/D=2 to tensor parallelism 2 (an args change)", func() {
		s := start(gpus(harness.NewDGD(newNamespace(), "tp").Disagg(4, 2, "vllm:v1").Obj()))
		s.update(addArgs("decode", "--tensor-parallel-size", "2"))
		s.waitRolledOut(2)
		st := s.w.Snapshot()
		Expect(st.PassStates).To(BeNumerically(">", 2))
		Expect(st.MaxSkew).To(BeNumerically("<=", 0.5))
	})

	It("holds a 50% partition, then completes when promoted", func() {
		s := start(gpus(harness.NewDGD(newNamespace(), "canary").Disagg(4, 2, "vllm:v1").Partition("50%").Obj()))
		s.update(image("vllm:v2"))
		s.until("partitioned", func(d *v1alpha1.DynamoGraphDeployment, _ []corev1.Pod) bool {
			ru := d.Status.RollingUpdate
			return d.Status.UpdateRevisionNumber == 2 && ru != nil && ru.Reason == "Partitioned" &&
				d.Status.Services["prefill"].ReadyReplicas == 4 && d.Status.Services["decode"].ReadyReplicas == 2
		})
		d := s.dgd()
		Expect(Pool(d, 1)).To(Equal(map[string]int32{"prefill": 2, "decode": 1}))
		Expect(Pool(d, 2)).To(Equal(map[string]int32{"prefill": 2, "decode": 1}))
		s.update(func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Partition = nil })
		s.waitRolledOut(2)
	})

	It("runs a stepped canary: 75%, a timed pause, 25%, a pause until promoted", func() {
		obj := gpus(harness.NewDGD(newNamespace(), "stepped").Disagg(4, 2, "vllm:v1").Obj())
		p75, p25 := intstr.FromString("75%"), intstr.FromString("25%")
		obj.Spec.Rollout = &v1alpha1.RolloutSpec{Steps: []v1alpha1.RolloutStep{
			{Partition: &p75}, {Pause: &v1alpha1.RolloutPause{Duration: &metav1.Duration{Duration: 3 * time.Second}}},
			{Partition: &p25}, {Pause: &v1alpha1.RolloutPause{}},
		}}
		s := start(obj)
		s.update(image("vllm:v2"))
		atStep := func(i int32) func(*v1alpha1.DynamoGraphDeployment, []corev1.Pod) bool {
			return func(d *v1alpha1.DynamoGraphDeployment, pods []corev1.Pod) bool {
				ru := d.Status.RollingUpdate
				return d.Status.UpdateRevisionNumber == 2 && ru != nil && ru.CurrentStepIndex != nil && *ru.CurrentStepIndex == i && allReady(pods)
			}
		}
		s.until("step 2 (timed pause) at 75%", atStep(1))
		d := s.dgd()
		Expect(Pool(d, 1)).To(Equal(map[string]int32{"prefill": 3, "decode": 1}))
		Expect(Pool(d, 2)).To(Equal(map[string]int32{"prefill": 1, "decode": 1}))
		s.until("step 4 (until promoted) at 25%", atStep(3))
		d = s.dgd()
		Expect(Pool(d, 1)).To(Equal(map[string]int32{"prefill": 1, "decode": 1}))
		Expect(Pool(d, 2)).To(Equal(map[string]int32{"prefill": 3, "decode": 1}))
		Expect(d.Status.RollingUpdate.Message).To(HavePrefix("step 4/4: paused until promoted"))
		held := Pool(d, 2)
		Consistently(func() map[string]int32 { return Pool(s.dgd(), 2) }, 3*PodReadyDelay, 200*time.Millisecond).Should(Equal(held))
		s.update(func(d *v1alpha1.DynamoGraphDeployment) {
			metav1.SetMetaDataAnnotation(&d.ObjectMeta, v1alpha1.AnnotationPromote, "2/4")
		})
		s.waitRolledOut(2)
	})

	It("pauses mid-rollout and resumes: nothing is created, scaled or deleted from the Paused status to the resume, while readiness arrives", func() {
		s := start(gpus(harness.NewDGD(newNamespace(), "pause").Disagg(8, 4, "vllm:v1").Rollout("1", "0").Obj()))
		// A rollout whose new pods all turned ready before the Paused status was written
		// puts nothing to the test (seen on an idle machine: KWOK's 1 s Running→Ready
		// delay can beat the pause): such a round is rolled out and the next image paused
		// again, up to three rounds; every round must move nothing while paused.
		tested := false
		for round := int64(2); round <= 4 && !tested; round++ {
			s.update(image(fmt.Sprintf("vllm:v%d", round)))
			s.until("under way, new pods not ready yet", func(d *v1alpha1.DynamoGraphDeployment, pods []corev1.Pod) bool {
				return d.Status.UpdateRevisionNumber == round && Pool(d, round)["prefill"] >= 2 && !allReady(pods)
			})
			s.update(func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Paused = true })
			s.until("paused with every pod ready", func(d *v1alpha1.DynamoGraphDeployment, pods []corev1.Pod) bool {
				ru := d.Status.RollingUpdate
				return ru != nil && ru.Phase == v1alpha1.RolloutPaused && d.Status.ObservedGeneration == d.Generation && allReady(pods)
			})
			paused := s.w.StatusWrite(func(d *v1alpha1.DynamoGraphDeployment) bool {
				ru := d.Status.RollingUpdate
				return ru != nil && ru.Phase == v1alpha1.RolloutPaused && d.Status.ObservedGeneration == d.Generation
			})
			Expect(paused).NotTo(BeZero())
			resumed := s.update(func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Paused = false })
			Expect(s.w.Flush(ctx)).To(Succeed())
			// Comparing the live workloads' targets at every write between the two, not a
			// quiet state: the pods made ready while paused started passes that moved nothing.
			moved, ready := s.w.Changes(paused, resumed)
			Expect(moved).To(BeEmpty(), "workloads moved while paused (round %d)", round)
			GinkgoWriter.Printf("round %d, while paused: %v\n", round, ready)
			tested = len(ready) > 0
			s.waitRolledOut(round)
		}
		Expect(tested).To(BeTrue(), "in three rounds no readiness arrived while paused: the pause was not put to the test")
	})

	It("retargets A→B→C mid-rollout", func() {
		s := start(gpus(harness.NewDGD(newNamespace(), "abc").Disagg(8, 4, "vllm:a").Rollout("1", "0").Obj()))
		s.update(image("vllm:b"))
		s.until("B under way", func(d *v1alpha1.DynamoGraphDeployment, _ []corev1.Pod) bool {
			return d.Status.UpdateRevisionNumber == 2 && Pool(d, 2)["prefill"] >= 3
		})
		s.update(image("vllm:c"))
		s.waitRolledOut(3)
	})

	It("rolls back to revision 1, renumbered 3", func() {
		s := start(gpus(harness.NewDGD(newNamespace(), "undo").Disagg(4, 2, "vllm:v1").Obj()))
		s.update(image("vllm:v2"))
		s.waitRolledOut(2)
		var revs appsv1.ControllerRevisionList
		Expect(k8s.List(ctx, &revs, client.InNamespace(s.ns))).To(Succeed())
		var one *appsv1.ControllerRevision
		for i := range revs.Items {
			if revs.Items[i].Revision == 1 {
				one = &revs.Items[i]
			}
		}
		Expect(one).NotTo(BeNil())
		s.update(func(d *v1alpha1.DynamoGraphDeployment) {
			spec, err := revisions.Restore(d, one)
			Expect(err).NotTo(HaveOccurred())
			d.Spec = *spec
		})
		s.waitRolledOut(3)
		Expect(UpdateHash(s.dgd())).To(Equal(revisions.HashOf(one)))
	})

	It("recreates: old pods are gone before new ones start", func() {
		s := start(gpus(harness.NewDGD(newNamespace(), "recreate").Disagg(4, 2, "vllm:v1").Strategy(v1alpha1.RecreateStrategy).Obj()))
		old := UpdateHash(s.dgd())
		s.update(image("vllm:v2"))
		s.until("rolled out without overlap", func(d *v1alpha1.DynamoGraphDeployment, pods []corev1.Pod) bool {
			var oldPods, newPods int
			for _, p := range pods {
				switch p.Labels[v1alpha1.LabelWorkerHash] {
				case old:
					oldPods++
				case UpdateHash(d):
					newPods++
				}
			}
			Expect(oldPods == 0 || newPods == 0 || d.Status.UpdateRevisionNumber == 1).To(BeTrue(), "old and new pods coexist")
			return d.Status.UpdateRevisionNumber == 2 && RolledOut(d, pods)
		})
	})

	It("deletes every pod, workload and revision with the DGD", func() {
		s := start(gpus(harness.NewDGD(newNamespace(), "gone").Disagg(2, 1, "vllm:v1").Obj()))
		Expect(k8s.Delete(ctx, s.dgd())).To(Succeed())
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			var deps appsv1.DeploymentList
			var revs appsv1.ControllerRevisionList
			var rss appsv1.ReplicaSetList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(s.ns))).To(Succeed())
			g.Expect(k8s.List(ctx, &deps, client.InNamespace(s.ns))).To(Succeed())
			g.Expect(k8s.List(ctx, &revs, client.InNamespace(s.ns))).To(Succeed())
			g.Expect(k8s.List(ctx, &rss, client.InNamespace(s.ns))).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
			g.Expect(deps.Items).To(BeEmpty())
			g.Expect(revs.Items).To(BeEmpty())
			g.Expect(rss.Items).To(BeEmpty())
		}, time.Minute, 200*time.Millisecond).Should(Succeed())
	})

	It("rolls the seed example (Frontend + VllmDecodeWorker + VllmPrefillWorker) to TP 2 on decode", func() {
		ns := newNamespace()
		obj := readSample("disagg.yaml")
		obj.Namespace = ns
		s := start(obj)
		tp2 := readSample("disagg-tp2.yaml")
		s.update(func(d *v1alpha1.DynamoGraphDeployment) { d.Spec = tp2.Spec })
		s.waitRolledOut(2)
		for _, p := range s.pods() {
			if p.Labels[v1alpha1.LabelService] == "VllmDecodeWorker" {
				Expect(p.Spec.Containers[0].Args).To(ContainElement("--tensor-parallel-size"))
				Expect(p.Spec.NodeName).NotTo(BeEmpty())
			}
		}
	})
})

func readSample(name string) *v1alpha1.DynamoGraphDeployment {
	raw, err := os.ReadFile(filepath.Join(cluster.RepoRoot(), "config", "samples", name))
	Expect(err).NotTo(HaveOccurred())
	var d v1alpha1.DynamoGraphDeployment
	Expect(yaml.Unmarshal(raw, &d)).To(Succeed())
	return &d
}

func allReady(pods []corev1.Pod) bool {
	for i := range pods {
		if !cluster.PodReady(&pods[i]) || !pods[i].DeletionTimestamp.IsZero() {
			return false
		}
	}
	return true
}
