package reliability_test

import (
	"fmt"
	"sort"
	"strings"
	"time"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/faults"
	"github.com/dgd-rollout/operator/test/harness"
)

// The LeaderWorkerSet and Grove backends under the same faults as the Deployment
// scenarios: every write of theirs (creates, scale subresources, template patches,
// deletes) fails at the suite's rate, a share of them after the server applied it.
var _ = Describe("every backend under write faults, after commit too", func() {
	for _, tc := range []struct {
		name  string
		build func(ns string) *v1alpha1.DynamoGraphDeployment
		// afterCommit are writes of the backend that are sure to be applied and their
		// answer lost, whatever the random faults do (op, kind, subresource).
		afterCommit [][3]string
	}{
		{"multinode prefill 4x2 / decode 2x4 on LeaderWorkerSets", func(ns string) *v1alpha1.DynamoGraphDeployment {
			return harness.NewDGD(ns, "gangs").Disagg(4, 2, "vllm:v1").Multinode("prefill", 2).Multinode("decode", 4).Rollout("1", "0").Obj()
		}, [][3]string{{"create", "LeaderWorkerSet", ""}, {"update", "LeaderWorkerSet", "scale"}, {"delete", "LeaderWorkerSet", ""}}},
		{"P=4 cliques / decode 2x2 scaling groups on Grove", func(ns string) *v1alpha1.DynamoGraphDeployment {
			return harness.NewDGD(ns, "grove").Disagg(4, 2, "vllm:v1").Multinode("decode", 2).Backend(v1alpha1.BackendGrove).Rollout("1", "0").Obj()
		}, [][3]string{{"create", "PodCliqueSet", ""}, {"update", "PodClique", "scale"}, {"patch", "PodCliqueSet", ""}, {"delete", "PodCliqueSet", ""}}},
	} {
		It("rolls "+tc.name+" to completion with every invariant at every step and nothing duplicated or left behind", func() {
			withFaults(func() {
				ns := newNamespace()
				obj := tc.build(ns)
				old := deploy(obj).Hashes()[0]
				for i, w := range tc.afterCommit {
					faulty.InjectAfterCommit(1, []faults.Code{faults.Timeout, faults.InternalError}[i%2], faults.On(faults.Op(w[0]), w[1], w[2], ns))
				}
				DeferCleanup(faulty.ClearInjected)
				update(ns, obj.Name, func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
				steps, err := drive(ns, obj.Name, -1, maxSteps, harness.CompletedAt(2))
				Expect(err).NotTo(HaveOccurred())
				last := steps[len(steps)-1]
				Expect(last.Hashes()).To(HaveLen(1))
				Expect(last.Hashes()[0]).NotTo(Equal(old))
				expectNothingLeft(ns, obj.Name, 2)
				Expect(faulty.Pending()).To(BeZero(), "every write of the backend given a fault after commit was made")
			})
		})
	}
})

// expectNothingLeft waits until a completed DGD's namespace holds exactly what its
// update revision needs: revisions of distinct templates and numbers (want of them),
// every workload and Service controlled by the DGD (Grove's headless Services by their
// PodCliqueSet), the worker ones of the update revision only and one per service. The
// workload controllers are played meanwhile (Grove removes its finalizers from what
// the operator deleted).
func expectNothingLeft(ns, name string, revisions int) {
	GinkgoHelper()
	Eventually(func() []string {
		_, err := env.Play(ctx, ns, name, -1)
		Expect(err).NotTo(HaveOccurred())
		return leftovers(ns, name, revisions)
	}, harness.SettleTimeout, 200*time.Millisecond).Should(BeEmpty())
}

func leftovers(ns, name string, revisions int) []string {
	GinkgoHelper()
	var d v1alpha1.DynamoGraphDeployment
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
	update := d.Status.UpdateWorkerHash
	var out []string
	hashes, numbers := map[string]string{}, map[int64]string{}
	revs := controllerRevisions(ns)
	for _, r := range revs {
		if !metav1.IsControlledBy(&r, &d) {
			out = append(out, fmt.Sprintf("ControllerRevision %s is not the DGD's", r.Name))
		}
		h := r.Labels[v1alpha1.LabelWorkerHash]
		if other, dup := hashes[h]; dup {
			out = append(out, fmt.Sprintf("ControllerRevisions %s and %s record worker hash %s", other, r.Name, h))
		}
		if other, dup := numbers[r.Revision]; dup {
			out = append(out, fmt.Sprintf("ControllerRevisions %s and %s are both number %d", other, r.Name, r.Revision))
		}
		hashes[h], numbers[r.Revision] = r.Name, r.Name
	}
	if len(revs) != revisions {
		out = append(out, fmt.Sprintf("%d ControllerRevisions, want %d", len(revs), revisions))
	}
	seen := map[string]string{} // kind/service/hash -> name
	check := func(kind string, o client.Object) {
		if !metav1.IsControlledBy(o, &d) {
			out = append(out, fmt.Sprintf("%s %s is not controlled by the DGD (orphaned)", kind, o.GetName()))
			return
		}
		h := o.GetLabels()[v1alpha1.LabelWorkerHash]
		if h != "" && h != update {
			out = append(out, fmt.Sprintf("%s %s of revision %s is left after the rollout to %s", kind, o.GetName(), h, update))
		}
		key := kind + "/" + o.GetLabels()[v1alpha1.LabelService] + "/" + h
		if other, dup := seen[key]; dup {
			out = append(out, fmt.Sprintf("%s %s duplicates %s", kind, o.GetName(), other))
		}
		seen[key] = o.GetName()
	}
	var deps appsv1.DeploymentList
	var lwss lwsv1.LeaderWorkerSetList
	var sets grovev1.PodCliqueSetList
	var svcs corev1.ServiceList
	for _, l := range []client.ObjectList{&deps, &lwss, &sets, &svcs} {
		Expect(env.Client.List(ctx, l, client.InNamespace(ns))).To(Succeed())
	}
	for i := range deps.Items {
		check("Deployment", &deps.Items[i])
	}
	for i := range lwss.Items {
		check("LeaderWorkerSet", &lwss.Items[i])
	}
	for i := range sets.Items {
		check("PodCliqueSet", &sets.Items[i])
	}
	for i := range svcs.Items {
		if ref := metav1.GetControllerOf(&svcs.Items[i]); ref != nil && ref.Kind == "PodCliqueSet" {
			continue // Grove's headless Service of a replica, gone with its PodCliqueSet
		}
		check("Service", &svcs.Items[i])
	}
	sort.Strings(out)
	return out
}

// expectReadmeCounts holds the fault counts of the default run to the bounds the
// test/envtest/reliability row of docs/testing.md (once the README's) states: enough
// writes, a share of them failed near the rate, faults after commit, and faults in the
// writes of every backend.
func expectReadmeCounts(st faults.Stats) {
	GinkgoHelper()
	// At least 900 writes: the faults must meet enough of the operator's writes for the
	// share below to mean something. The bound was 1,000 under the 1,344 writes of Nov 26;
	// the operator's writes over the same specs have since fallen to 999–1,015 (four runs
	// of 4f4b228, Dec 2; they move with the passes the timing makes), and a clean-clone run
	// failed at 999. 900 is 10% under the lowest seen: a run that loses about three of
	// the 26 specs' writes (about 39 a spec) fails here.
	Expect(st.Writes).To(BeNumerically(">=", 900), "writes over the suite: %s", st)
	share := float64(st.Injected) / float64(st.Writes)
	Expect(share).To(BeNumerically("~", defaultRate, 0.02), "the share of writes failed: %s", st)
	Expect(st.AfterCommit).To(BeNumerically(">=", 15), "faults after commit: %s", st)
	byBackend := map[string]int{}
	for w, n := range st.ByWrite {
		kind, _, _ := strings.Cut(strings.Fields(w)[1], "/")
		switch kind {
		case "PodCliqueSet", "PodClique", "PodCliqueScalingGroup":
			kind = "Grove"
		}
		byBackend[kind] += n
	}
	for _, b := range []string{"Deployment", "LeaderWorkerSet", "Grove"} {
		Expect(byBackend[b]).To(BeNumerically(">", 0), "no fault in a write of the %s backend: %s", b, st)
	}
}
