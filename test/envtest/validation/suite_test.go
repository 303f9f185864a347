// Package validation_test applies bad DynamoGraphDeployment manifests to a real API
// server (envtest, our CRD installed, no operator) under strict field validation, as
// `kubectl apply` does by default, and checks that admission rejects each with a
// message naming the field.
package validation_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dgd-rollout/operator/test/harness"
)

var (
	env *harness.Env
	ctx = context.Background()
	nsN int
)

func TestValidation(t *testing.T) {
	RegisterFailHandler(Fail)
	// A pass that must happen (a status, an Event) gets 10 s, not Gomega's 1 s: a
	// first pass reads each name it creates past the cache (decide's claim), and CI runs
	// on 2 loaded cores.
	SetDefaultEventuallyTimeout(10 * time.Second)
	SetDefaultEventuallyPollingInterval(harness.PollInterval)
	RunSpecs(t, "Admission validation of DynamoGraphDeployments (envtest)")
}

var _ = BeforeSuite(func() {
	var err error
	env, err = harness.Start(false)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
})

// newNamespace gives every case its own namespace, so that a manifest accepted by
// mistake cannot make the next one fail with AlreadyExists.
func newNamespace() string {
	nsN++
	ns := fmt.Sprintf("val-%d", nsN)
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	return ns
}
