package lws_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/e2e"
	"github.com/dgd-rollout/operator/test/harness"
)

// deploy creates a DGD and drives it to its first completed revision. A watcher of its
// live workloads (Deployments and LeaderWorkerSets) judges surge and prefill-with-decode
// at every write and ratio, orphans and the status's account at every pass boundary,
// until the spec ends.
func deploy(obj *v1alpha1.DynamoGraphDeployment) harness.Snapshot {
	w, err := e2e.WatchWith(ctx, env.Config, obj.Namespace, obj.Name, e2e.Options{LeaderWorkerSets: true})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		Expect(w.Flush(ctx)).To(Succeed())
		w.Stop()
		st := w.Snapshot()
		GinkgoWriter.Printf("%s/%s watcher: %d events, %d pass boundaries, max skew %.2f\n", obj.Namespace, obj.Name, st.Events, st.PassStates, st.MaxSkew)
		Expect(w.Violations()).To(BeEmpty(), "the live workloads of %s/%s", obj.Namespace, obj.Name)
	})
	s, err := env.Deploy(ctx, obj, harness.Snapshot.Completed)
	Expect(err).NotTo(HaveOccurred())
	return s
}

// update applies a change to the live DGD.
func update(ns, name string, change func(*v1alpha1.DynamoGraphDeployment)) {
	Expect(env.Update(ctx, ns, name, change)).To(Succeed())
}
