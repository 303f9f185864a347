package lws_test

import (
	. "github.com/onsi/gomega"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/harness"
)

// deploy creates a DGD and drives it to its first completed revision.
func deploy(obj *v1alpha1.DynamoGraphDeployment) harness.Snapshot {
	s, err := env.Deploy(ctx, obj, harness.Snapshot.Completed)
	Expect(err).NotTo(HaveOccurred())
	return s
}

// update applies a change to the live DGD.
func update(ns, name string, change func(*v1alpha1.DynamoGraphDeployment)) {
	Expect(env.Update(ctx, ns, name, change)).To(Succeed())
}
