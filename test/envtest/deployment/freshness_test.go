package deployment_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/harness"
)

var _ = Describe("freshness", func() {
	It("plans from no Deployment status that lags the operator's last write, even one overstating readiness", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "lag").Service("worker", v1alpha1.ComponentTypeWorker, "", 4, "vllm:v1").Rollout("1", "0").Obj()
		deploy(obj)
		update(ns, "lag", harness.Image("vllm:v2"))
		// truth is what the Deployment controller really has available, per Deployment:
		// what PlayDeployments last wrote. The lagging statuses in between claim more.
		truth := map[string]int32{}
		s, err := env.Take(ctx, ns, "lag")
		Expect(err).NotTo(HaveOccurred())
		for _, d := range s.All {
			truth[d.Name] = d.Status.AvailableReplicas
		}
		lagged := 0
		for step := 0; step < 40; step++ {
			before := reconciles()
			wrote, err := env.LagDeployments(ctx, ns, "lag")
			Expect(err).NotTo(HaveOccurred())
			if len(wrote) > 0 {
				lagged++
				// The operator has seen the lagging statuses and done what it does with them.
				Eventually(reconciles).Should(BeNumerically(">", before))
				Eventually(harness.Idle).Should(BeTrue())
			}
			s, err := env.Take(ctx, ns, "lag")
			Expect(err).NotTo(HaveOccurred())
			var available int32
			for _, d := range s.All {
				if d.Labels[v1alpha1.LabelService] == "worker" {
					available += min(ptr.Deref(d.Spec.Replicas, 1), truth[d.Name])
				}
			}
			Expect(available).To(BeNumerically(">=", 4), "step %d: replicas %v, truly available %d (maxUnavailable 0)", step, s.Replicas(), available)
			if s.Completed() {
				break
			}
			_, err = env.PlayDeployments(ctx, ns, "lag", 1)
			Expect(err).NotTo(HaveOccurred())
			s, err = env.WaitSettled(ctx, ns, "lag")
			Expect(err).NotTo(HaveOccurred())
			for _, d := range s.All {
				truth[d.Name] = d.Status.AvailableReplicas
			}
		}
		Expect(lagged).To(BeNumerically(">=", 4), "the lagging controller had its say at every step")
		Eventually(func() bool { s, _ := env.Take(ctx, ns, "lag"); return s.Completed() }).Should(BeTrue())
	})
})
