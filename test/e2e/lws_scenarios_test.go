package e2e

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/harness"
)

var _ = Describe("LeaderWorkerSet backend on the local control plane (real LWS and StatefulSet controllers)", func() {
	It("rolls multinode prefill 4x2 / decode 2x4 to a new image, gangs whole, roles in lockstep", func() {
		obj := harness.NewDGD(newNamespace(), "gangs").Disagg(4, 2, "vllm:v1").
			Multinode("prefill", 2).Multinode("decode", 4).Obj()
		s := start(gpus(obj))
		checkGangs(s)
		s.update(image("vllm:v2"))
		s.waitRolledOut(2)
		checkGangs(s)
		st := s.w.Snapshot()
		GinkgoWriter.Printf("multinode rollout: min ready gangs %v, peak pods %v, max skew %.2f over %d passes\n",
			st.MinReady, st.PeakPods, st.MaxSkew, st.PassStates)
		Expect(st.MinReady["prefill"]).To(BeNumerically(">=", 3))
		Expect(st.MinReady["decode"]).To(BeNumerically(">=", 2), "maxUnavailable 25% of 2 gangs rounds down to 0")
		Expect(st.MaxSkew).To(BeNumerically("<=", 0.25), "lockstep: |p/4 - d/2| stays below the rule's 1/2 at every pass")
	})
})

// checkGangs verifies the pods of every LeaderWorkerSet: nodeCount pods per group, all
// bound to a fake GPU node, leader and workers carrying the revision's namespace.
func checkGangs(s *scenario) {
	d := s.dgd()
	var lwss lwsv1.LeaderWorkerSetList
	Expect(k8s.List(ctx, &lwss, client.InNamespace(s.ns), client.MatchingLabels{v1alpha1.LabelGraph: s.name})).To(Succeed())
	Expect(lwss.Items).NotTo(BeEmpty())
	groups := map[string][]corev1.Pod{}
	for _, p := range s.pods() {
		if key, ok := p.Labels[lwsGroupKey]; ok {
			groups[key] = append(groups[key], p)
		}
	}
	want := 0
	for _, name := range d.WorkerServiceNames() {
		want += int(d.Spec.Services[name].DesiredReplicas())
	}
	Expect(groups).To(HaveLen(want), "one group per gang replica")
	for _, pods := range groups {
		svc := d.Spec.Services[pods[0].Labels[v1alpha1.LabelService]]
		Expect(pods).To(HaveLen(int(svc.NodeCount())))
		for _, p := range pods {
			Expect(strings.HasPrefix(p.Spec.NodeName, "kwok-node-")).To(BeTrue(), p.Name)
			Expect(p.Spec.Containers[0].Resources.Limits).To(HaveKey(corev1.ResourceName("nvidia.com/gpu")))
			Expect(p.Labels[v1alpha1.LabelWorkerHash]).To(Equal(UpdateHash(d)))
		}
	}
}
