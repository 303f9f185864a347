package lws_test

import (
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
	e2e.WatchSpec(ctx, env.Config, obj.Namespace, obj.Name, e2e.Options{LeaderWorkerSets: true})
	s, err := env.Deploy(ctx, obj, harness.Snapshot.Completed)
	Expect(err).NotTo(HaveOccurred())
	return s
}

// update applies a change to the live DGD.
func update(ns, name string, change func(*v1alpha1.DynamoGraphDeployment)) {
	Expect(env.Update(ctx, ns, name, change)).To(Succeed())
}
