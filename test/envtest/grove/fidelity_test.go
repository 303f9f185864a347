package grove_test

import (
	"sync"
	"time"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/harness"
)

// readyPods watches a namespace's pods and records, per service, the fewest ready pods
// (Ready and not being deleted) seen at any pod event once the service first had want.
type readyPods struct {
	mu      sync.Mutex
	want    map[string]int32
	reached map[string]bool
	min     map[string]int32
}

func watchReadyPods(ns string, want map[string]int32) *readyPods {
	r := &readyPods{want: want, reached: map[string]bool{}, min: map[string]int32{}}
	stop, err := env.Watch(ctx, ns, func(c client.Reader) {
		var pods corev1.PodList
		if c.List(ctx, &pods, client.InNamespace(ns)) != nil {
			return
		}
		ready := map[string]int32{}
		for _, p := range pods.Items {
			if !p.DeletionTimestamp.IsZero() {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ready[p.Labels[v1alpha1.LabelService]]++
				}
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for svc, w := range r.want {
			if ready[svc] >= w {
				r.reached[svc] = true
			}
			if m, ok := r.min[svc]; r.reached[svc] && (!ok || ready[svc] < m) {
				r.min[svc] = ready[svc]
			}
		}
	}, &corev1.Pod{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(stop)
	return r
}

func (r *readyPods) fewest(service string) int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	Expect(r.reached[service]).To(BeTrue(), "%s never had its %d ready pods", service, r.want[service])
	return r.min[service]
}

// rolloutEvents are the operator's Events on a DGD, as "reason: note".
func rolloutEvents(ns, dgd string) []string {
	var evs eventsv1.EventList
	Expect(env.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range evs.Items {
		if e.Regarding.Name == dgd && e.Regarding.Kind == "DynamoGraphDeployment" {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

var _ = Describe("the fake Grove plays Grove as it is", func() {
	It("labels PCSGs with none of the template's labels, owns every object as Grove does and delays PodCliques by the token wait", func() {
		realTiming()
		ns := newNamespace()
		start := time.Now()
		s := deploy(onGrove(harness.NewDGD(ns, "shape").Disagg(1, 1, "vllm:v1").Multinode("decode", 2)).Obj())
		Expect(time.Since(start)).To(BeNumerically(">=", harness.DefaultGroveTiming.Token), "no PodClique before Grove's token requeue")
		pcs := revisionPCS(s, s.Hashes()[0]).Name
		var pcsg grovev1.PodCliqueScalingGroup
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pcs + "-0-decode"}, &pcsg)).To(Succeed())
		Expect(pcsg.Labels).NotTo(HaveKey(v1alpha1.LabelGraph))
		Expect(pcsg.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "grove-operator"))
		Expect(pcsg.Labels).To(HaveKeyWithValue("app.kubernetes.io/part-of", pcs))
		Expect(pcsg.OwnerReferences[0].Kind).To(Equal("PodCliqueSet"))
		var leader grovev1.PodClique
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pcs + "-0-decode-0-decode-ldr"}, &leader)).To(Succeed())
		Expect(leader.OwnerReferences[0].Kind).To(Equal("PodCliqueScalingGroup"))
		Expect(leader.Labels).To(HaveKeyWithValue(v1alpha1.LabelGraph, "shape"), "PodCliques keep the template's labels")
		var pods corev1.PodList
		Expect(env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"grove.io/podclique": leader.Name})).To(Succeed())
		Expect(pods.Items).To(HaveLen(1))
		Expect(pods.Items[0].Spec.Hostname).To(Equal(leader.Name + "-0"))
		Expect(pods.Items[0].Spec.Subdomain).To(Equal(pcs + "-0"))
		var svc corev1.Service
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pcs + "-0"}, &svc)).To(Succeed(), "Grove's headless Service of the replica")
		Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
		Expect(svc.Spec.PublishNotReadyAddresses).To(BeTrue(), "from the template's headlessServiceConfig, which the operator sets")
		Expect(svc.Spec.Selector).To(Equal(map[string]string{"app.kubernetes.io/managed-by": "grove-operator", "app.kubernetes.io/part-of": pcs,
			"grove.io/podcliqueset-replica-index": "0"}), "every pod of the replica")
		Expect(metav1.GetControllerOf(&svc).Name).To(Equal(pcs))
	})
})

var _ = Describe("Grove as the operator sees it", func() {
	It("finishes a first multinode deploy as soon as the PCSG reports its last gang, though the PCSG carries none of the DGD's labels", func() {
		ns := newNamespace()
		Expect(env.Client.Create(ctx, onGrove(harness.NewDGD(ns, "late").Disagg(1, 1, "vllm:v1").Multinode("decode", 2)).Obj())).To(Succeed())
		// Play Grove until every PodClique is ready while the PCSG, whose controller
		// runs after its cliques', still reports its gang unavailable.
		var pcsg *grovev1.PodCliqueScalingGroup
		var before float64
		Eventually(func(g Gomega) {
			var err error
			before, err = harness.Reconciles()
			g.Expect(err).NotTo(HaveOccurred())
			_, err = env.PlayGrove(ctx, ns, "late", -1)
			g.Expect(err).NotTo(HaveOccurred())
			var pclqs grovev1.PodCliqueList
			g.Expect(env.Client.List(ctx, &pclqs, client.InNamespace(ns))).To(Succeed())
			g.Expect(pclqs.Items).To(HaveLen(4), "frontend, prefill, and the decode gang's leader and worker")
			for _, c := range pclqs.Items {
				g.Expect(c.Status.ReadyReplicas).To(Equal(c.Spec.Replicas), c.Name)
			}
			var pcsgs grovev1.PodCliqueScalingGroupList
			g.Expect(env.Client.List(ctx, &pcsgs, client.InNamespace(ns))).To(Succeed())
			g.Expect(pcsgs.Items).To(HaveLen(1))
			pcsg = &pcsgs.Items[0]
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		Expect(pcsg.Status.AvailableReplicas).To(BeZero())
		By("the operator has acted on the cliques' readiness, and waits for the gang")
		Eventually(harness.Reconciles).Should(BeNumerically(">", before))
		Eventually(harness.Idle).Should(BeTrue())
		s, err := env.Take(ctx, ns, "late")
		Expect(err).NotTo(HaveOccurred())
		Expect(s.DGD.Status.RollingUpdate.Phase).NotTo(Equal(v1alpha1.RolloutCompleted))
		By("the PCSG's status change alone completes it")
		_, err = env.PlayGrove(ctx, ns, "late", -1)
		Expect(err).NotTo(HaveOccurred())
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pcsg), pcsg)).To(Succeed())
		Expect(pcsg.Status.AvailableReplicas).To(Equal(int32(1)))
		Eventually(func() v1alpha1.RolloutPhase {
			s, _ := env.Take(ctx, ns, "late")
			if ru := s.DGD.Status.RollingUpdate; ru != nil {
				return ru.Phase
			}
			return ""
		}, 3*time.Second, 50*time.Millisecond).Should(Equal(v1alpha1.RolloutCompleted))
	})

	It("rolls a multinode graph on real Grove labels and deletes the drained revision's PodCliqueSet whole, with no clique scaled to zero", func() {
		ns := newNamespace()
		first := deploy(onGrove(harness.NewDGD(ns, "drain").Disagg(2, 1, "vllm:v1").Multinode("prefill", 2).Multinode("decode", 2)).Obj())
		old := revisionPCS(first, first.Hashes()[0]).Name
		update(ns, "drain", harness.Image("vllm:v2"))
		_, err := env.Drive(ctx, ns, "drain", 1, 60, completed)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() []string { return rolloutEvents(ns, "drain") }).Should(ContainElement(ContainSubstring("deleted PodCliqueSet " + old + " (revision 1 drained)")))
	})

	DescribeTable("replaces a frontend's PodCliqueSet beside the old one, never below R - ⌊R/4⌋ ready frontend pods",
		func(r int32) {
			ns := newNamespace()
			d := harness.NewDGD(ns, "fe").Disagg(2, 1, "vllm:v1")
			d.Obj().Spec.Services["Frontend"].Replicas = ptr.To(r)
			first := deploy(onGrove(d).Obj())
			oldFE := stablePCS(first, "Frontend")
			watch := watchReadyPods(ns, map[string]int32{"Frontend": r})
			update(ns, "fe", func(d *v1alpha1.DynamoGraphDeployment) {
				d.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = "frontend:v2"
			})
			steps, err := env.Drive(ctx, ns, "fe", 1, 30, func(s harness.Snapshot) bool { return frontendOn(s, "frontend:v2") })
			Expect(err).NotTo(HaveOccurred())
			last := steps[len(steps)-1]
			Expect(stablePCS(last, "Frontend").Name).NotTo(Equal(oldFE.Name))
			Expect(last.DGD.Status.UpdateWorkerHash).To(Equal(first.UpdateHash()), "a frontend change rolls no worker")
			Expect(last.Hashes()).To(Equal(first.Hashes()), "a frontend change rolls no worker")
			Expect(watch.fewest("Frontend")).To(BeNumerically(">=", r-r/4))
			Eventually(func() []string { return rolloutEvents(ns, "fe") }).Should(ContainElement(ContainSubstring("deleted PodCliqueSet " + oldFE.Name + " (Frontend has")))
		},
		Entry("R = 1", int32(1)),
		Entry("R = 3", int32(3)),
	)

	It("adds and removes a planner without touching the frontend's PodCliqueSet", func() {
		ns := newNamespace()
		first := deploy(onGrove(harness.NewDGD(ns, "comp").Disagg(2, 1, "vllm:v1")).Obj())
		fe := stablePCS(first, "Frontend")
		watch := watchReadyPods(ns, map[string]int32{"Frontend": 1})
		update(ns, "comp", func(d *v1alpha1.DynamoGraphDeployment) {
			harness.AddService(d, "Planner", v1alpha1.ComponentTypePlanner, 1, "planner:v1")
		})
		_, err := env.Drive(ctx, ns, "comp", 1, 20, func(s harness.Snapshot) bool {
			p := stablePCS(s, "Planner")
			return p != nil && s.DGD.Status.Services["Planner"].ReadyReplicas == 1
		})
		Expect(err).NotTo(HaveOccurred())
		update(ns, "comp", func(d *v1alpha1.DynamoGraphDeployment) { delete(d.Spec.Services, "Planner") })
		steps, err := env.Drive(ctx, ns, "comp", 1, 20, func(s harness.Snapshot) bool { return stablePCS(s, "Planner") == nil })
		Expect(err).NotTo(HaveOccurred())
		now := stablePCS(steps[len(steps)-1], "Frontend")
		Expect(now.UID).To(Equal(fe.UID), "the frontend's PodCliqueSet was neither replaced nor recreated")
		Expect(watch.fewest("Frontend")).To(Equal(int32(1)))
	})
})

// cliquesBelowMinAvailable watches every PodClique and PCSG of the suite's namespaces
// and records any that is set below its minAvailable while its PodCliqueSet lives:
// Grove reports that as lost replicas and gang-terminates it after terminationDelay.
type cliquesBelowMinAvailable struct {
	mu    sync.Mutex
	found map[string]bool
}

func (w *cliquesBelowMinAvailable) check(c client.Reader) {
	var pclqs grovev1.PodCliqueList
	var pcsgs grovev1.PodCliqueScalingGroupList
	if c.List(ctx, &pclqs) != nil || c.List(ctx, &pcsgs) != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range pclqs.Items {
		if p.DeletionTimestamp.IsZero() && p.Spec.Replicas < ptr.Deref(p.Spec.MinAvailable, 1) {
			w.found[p.Namespace+"/"+p.Name] = true
		}
	}
	for _, g := range pcsgs.Items {
		if g.DeletionTimestamp.IsZero() && g.Spec.Replicas < ptr.Deref(g.Spec.MinAvailable, 1) {
			w.found[g.Namespace+"/"+g.Name] = true
		}
	}
}

func (w *cliquesBelowMinAvailable) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for k := range w.found {
		out = append(out, k)
	}
	return out
}

// groveWarnings lists every Warning event the fake Grove recorded in the suite.
func groveWarnings() []string {
	var out []string
	for i := 1; i <= nsN; i++ {
		ws, err := env.GroveWarnings(ctx, nsName(i))
		Expect(err).NotTo(HaveOccurred())
		for _, w := range ws {
			out = append(out, nsName(i)+": "+w)
		}
	}
	return out
}
