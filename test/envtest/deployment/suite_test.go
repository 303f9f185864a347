// Package deployment_test runs the operator against a real API server with the
// Deployment backend, playing the Deployment controller by patching Deployment status.
package deployment_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dgd-rollout/operator/test/gateway"
	"github.com/dgd-rollout/operator/test/harness"
)

var (
	env *harness.Env
	ctx = context.Background()
	nsN int
)

func TestDeploymentBackend(t *testing.T) {
	RegisterFailHandler(Fail)
	// A pass that must happen (a status, an Event) gets 10 s, not Gomega's 1 s: a
	// first pass reads each name it creates past the cache (decide's claim), and CI runs
	// on 2 loaded cores.
	SetDefaultEventuallyTimeout(10 * time.Second)
	SetDefaultEventuallyPollingInterval(harness.PollInterval)
	RunSpecs(t, "Deployment backend (envtest)")
}

var _ = BeforeSuite(func() {
	// The Gateway API's CRDs are served, so the operator runs its Gateway API provider
	// (cohorts_test.go); the test Gateway controller (test/gateway) judges the routes.
	crds, err := gateway.CRDDir()
	Expect(err).NotTo(HaveOccurred())
	env, err = harness.Start(true, crds)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
	Expect(env.Client.Create(ctx, gateway.GatewayClass(gatewayClass, gatewayController))).To(Succeed())
	gwc := &gateway.Controller{Name: gatewayController, Delay: 100 * time.Millisecond}
	stop, err := gwc.Start(env.Config)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(stop()).To(Succeed()) })
})

// The test Gateway controller's class and name.
const (
	gatewayClass      = "test"
	gatewayController = "example.com/test-gateway"
)

// newNamespace gives every spec its own namespace.
func newNamespace() string {
	nsN++
	ns := fmt.Sprintf("dep-%d", nsN)
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	return ns
}
