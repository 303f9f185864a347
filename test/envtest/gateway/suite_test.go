// Package gateway_test runs the Gateway API traffic provider (traffic/gatewayapi)
// against a real API server with the Gateway API's CRDs (sigs.k8s.io/gateway-api's
// config/crd/standard, from the module cache) and the test Gateway controller
// (test/gateway) judging routes in this process: the provider's route is applied as
// the operator's controller applies it (created with the DGD as controller, updated
// with the cached route's resourceVersion when not Same), every state of it is
// watched, and Effect is checked at each against the suite's own reading of when a
// split is in effect (TRAFFIC.md).
package gateway_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/gateway"
	"github.com/dgd-rollout/operator/test/harness"
)

// controllerName is the test Gateway controller's; class "test" names it, class
// "theirs" another controller that never runs.
const controllerName = "example.com/test-gateway"

// delay is the test controller's delay between judging a route and writing its
// status: long enough that every spec sees a route whose newest generation is not
// yet judged, short enough to keep the suite quick.
const delay = 200 * time.Millisecond

var (
	env    *harness.Env
	k8s    client.WithWatch
	scheme *runtime.Scheme
	gwc    *gateway.Controller
	ctx    = context.Background()
	nsN    int
)

func TestGateway(t *testing.T) {
	RegisterFailHandler(Fail)
	// A status the test controller must write gets 10 s (it writes within delay of
	// an event; CI runs on 2 loaded cores).
	SetDefaultEventuallyTimeout(10 * time.Second)
	SetDefaultEventuallyPollingInterval(harness.PollInterval)
	RunSpecs(t, "Gateway API provider against a real API server and a test Gateway controller (envtest)")
}

var _ = BeforeSuite(func() {
	crds, err := gateway.CRDDir()
	Expect(err).NotTo(HaveOccurred())
	env, err = harness.Start(false, crds)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })

	scheme = gateway.Scheme()
	Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	k8s, err = client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Create(ctx, gateway.GatewayClass("test", controllerName))).To(Succeed())
	Expect(k8s.Create(ctx, gateway.GatewayClass("theirs", "example.com/other"))).To(Succeed())

	gwc = &gateway.Controller{Name: controllerName, Delay: delay}
	stop, err := gwc.Start(env.Config)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(stop()).To(Succeed()) })
})

// newNamespace makes a namespace of its own for a spec.
func newNamespace() string {
	nsN++
	ns := fmt.Sprintf("gw-%d", nsN)
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	return ns
}
