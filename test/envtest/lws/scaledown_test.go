package lws_test

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/deployment"
	"github.com/dgd-rollout/operator/backends/lws"
	"github.com/dgd-rollout/operator/controllers"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/test/invariants"
)

// A LeaderWorkerSet's scale-down removes its highest groups whatever their readiness
// (harness.PlayLeaderWorkerSets, after the StatefulSet controller), so a gang that
// failed by itself at a low index stays while ready ones above it go. The operator
// assumes the worst (backends.UnreadyFirstScaler is false for LeaderWorkerSets); an
// operator that believed the unready gang would go first is caught.

// failedGangRollout deploys a multinode worker of 4 gangs (maxSurge 1, maxUnavailable
// 1), fails its gang 1 and rolls a new image, playing each step's scale-down before
// the readiness that follows it (a deleted pod goes at once, a new gang is ready
// later). It returns the first invariant violation of a settled step, or "" once the
// rollout completes.
func failedGangRollout(name string) string {
	GinkgoHelper()
	ns := newNamespace()
	obj := harness.NewDGD(ns, name).Service("worker", "worker", "", 4, "vllm:v1").Multinode("worker", 2).Rollout("1", "1").Obj()
	s := deploy(obj)
	Expect(s.LWS).To(HaveLen(1))
	Expect(env.FailLeaderWorkerSetGroup(ctx, ns, s.LWS[0].Name, 1)).To(Succeed())
	_, err := env.WaitSettled(ctx, ns, name)
	Expect(err).NotTo(HaveOccurred())
	update(ns, name, harness.Image("vllm:v2"))
	var floorOK map[string]bool
	for i := 0; i < 30; i++ {
		for _, grow := range []int32{0, 1} {
			st, err := env.WaitSettled(ctx, ns, name)
			Expect(err).NotTo(HaveOccurred())
			services := invariants.ServicesOf(&st.DGD)
			if v := invariants.Check(services, st.Workloads, floorOK); len(v) > 0 {
				return fmt.Sprintf("step %d: %s; replicas %v", i, strings.Join(v, "; "), st.Replicas())
			}
			floorOK = invariants.FloorHolds(services, st.Workloads)
			if st.Completed() {
				return ""
			}
			_, err = env.PlayLeaderWorkerSets(ctx, ns, name, grow)
			Expect(err).NotTo(HaveOccurred())
		}
	}
	Fail("not completed after 30 steps")
	return ""
}

var _ = Describe("scale-down of a LeaderWorkerSet with a failed gang", func() {
	It("keeps R - maxUnavailable gangs ready while the highest, ready gangs go first", func() {
		Expect(failedGangRollout("failed")).To(BeEmpty())
	})

	It("catches an operator that assumes a LeaderWorkerSet removes its unready gang first (a backend decorated)", func() {
		Expect(env.RestartOperator(harness.Broken{Reconciler: func(mgr ctrl.Manager, r *controllers.Reconciler) {
			r.Backends = backends.NewRegistry().
				Register(v1alpha1.BackendDeployment, deployment.New(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetScheme(), render.Config{})).
				Register(v1alpha1.BackendLeaderWorkerSet, unreadyFirst{lws.New(mgr.GetClient(), mgr.GetScheme(), render.Config{})})
		}})).To(Succeed())
		DeferCleanup(func() { Expect(env.RestartOperator(harness.Broken{})).To(Succeed()) })
		Expect(failedGangRollout("believer")).To(ContainSubstring("availability: worker has 2 ready, fewer than 4-1"))
	})
})

// unreadyFirst is a LeaderWorkerSet backend that claims its scale-down removes unready
// replicas first, as a ReplicaSet's does.
type unreadyFirst struct{ backends.Backend }

func (u unreadyFirst) Describe() backends.Description {
	d := u.Backend.Describe()
	d.RemovesUnreadyFirst = true
	return d
}
