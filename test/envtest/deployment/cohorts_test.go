package deployment_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/traffic/proxy"
)

// dynamoUpgrade bumps the frontend's and every worker's image in one edit: a Dynamo
// upgrade, which spec.rollout.frontends Auto (the default) runs as cohorts.
func dynamoUpgrade(tag string) func(*v1alpha1.DynamoGraphDeployment) {
	return func(d *v1alpha1.DynamoGraphDeployment) {
		harness.SetImage(d, "vllm:"+tag)
		d.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.7." + tag
	}
}

// frontendEnv is the main container's env of a Deployment, by name.
func frontendEnv(s harness.Snapshot, name string) map[string]string {
	for _, d := range s.All {
		if d.Name == name {
			env := map[string]string{}
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
			return env
		}
	}
	return nil
}

var _ = Describe("cohorts", func() {
	It("runs a Dynamo upgrade (frontend and workers together) as cohorts through the proxy: each revision's frontend discovers only its namespace, the old cohort goes last", func() {
		ns := newNamespace()
		obj := harness.NewDGD(ns, "up").Disagg(4, 2, "vllm:v1").Obj()
		first := deploy(obj)
		oldHash := first.Hashes()[0]
		Expect(first.Stable).To(HaveLen(1), "a shared frontend until the first Dynamo upgrade (Auto)")
		update(ns, obj.Name, dynamoUpgrade("1"))
		steps, err := env.Drive(ctx, ns, obj.Name, 1, 80, func(s harness.Snapshot) bool {
			return s.Completed() && s.DGD.Status.UpdateRevisionNumber == 2 && len(s.Hashes()) == 1
		})
		Expect(err).NotTo(HaveOccurred())
		last := steps[len(steps)-1]
		newHash := last.Hashes()[0]
		Expect(newHash).NotTo(Equal(oldHash))

		By("every state: a cohort frontend discovers exactly its revision's namespace, and no shared frontend runs beside two revisions")
		for i, s := range steps {
			revs := map[string]bool{}
			for _, w := range s.Workloads {
				if w.Service != "Frontend" && w.Spec > 0 {
					revs[w.Hash] = true
				}
			}
			for _, d := range s.All {
				if d.Labels[v1alpha1.LabelService] != "Frontend" || d.Labels[v1alpha1.LabelTrafficProxy] != "" {
					continue
				}
				env := frontendEnv(s, d.Name)
				h := d.Labels[v1alpha1.LabelWorkerHash]
				if h == "" {
					Expect(len(revs)).To(BeNumerically("<=", 1), "step %d: the shared frontend %s beside revisions %v", i, d.Name, revs)
					continue
				}
				Expect(env[v1alpha1.EnvDynNamespace]).To(Equal(fmt.Sprintf("%s-up-%s", ns, h)), "step %d: %s", i, d.Name)
				Expect(env).NotTo(HaveKey(v1alpha1.EnvDynNamespacePrefix), "step %d: %s", i, d.Name)
			}
		}

		By("the end: the new revision's frontend and workers alone, the entry Service selecting the proxy")
		Expect(last.Stable).To(BeEmpty(), "no shared frontend in cohort form")
		var names []string
		for _, d := range last.All {
			if d.Labels[v1alpha1.LabelTrafficProxy] == "" {
				names = append(names, d.Name)
			}
		}
		Expect(names).To(ConsistOf("up-frontend-"+newHash, "up-decode-"+newHash, "up-prefill-"+newHash))
		Expect(last.Proxies).To(HaveLen(1))
		var entry corev1.Service
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "up-frontend"}, &entry)).To(Succeed())
		Expect(entry.Spec.Selector).To(HaveKeyWithValue(proxy.LabelProxy, "true"))
		var cohort corev1.Service
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: backends.CohortServiceName("up", "Frontend", newHash)}, &cohort)).To(Succeed())
		Expect(cohort.Spec.ClusterIP).NotTo(Equal(corev1.ClusterIPNone))
		Expect(cohort.Spec.Selector).To(HaveKeyWithValue(v1alpha1.LabelWorkerHash, newHash))
		st := last.DGD.Status
		Expect(st.Traffic).NotTo(BeNil())
		Expect(st.Traffic.Provider).To(Equal(v1alpha1.TrafficProxy))
		Expect(st.Cohorts).To(HaveLen(1))
		Expect(st.Cohorts[0].Hash).To(Equal(newHash))
		Expect(st.Cohorts[0].Weight).To(Equal(int32(100)))
		Expect(st.Cohorts[0].WeightInEffect).To(Equal(ptr.To(int32(100))))

		By("the traffic moved while both cohorts ran, and never to a cohort that could not serve")
		shared := 0
		for _, s := range steps {
			for _, c := range s.DGD.Status.Cohorts {
				if c.Weight > 0 {
					Expect(c.Routable).To(BeTrue(), "revision %d weighted %d%% while not routable", c.Revision, c.Weight)
				}
			}
			if len(s.DGD.Status.Cohorts) == 2 && s.DGD.Status.Cohorts[0].Weight > 0 && s.DGD.Status.Cohorts[1].Weight > 0 {
				shared++
			}
		}
		Expect(shared).To(BeNumerically(">", 0), "no state split the traffic between the two cohorts")
	})
})
