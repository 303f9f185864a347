// Package conversion_test runs the real API server against the operator's /convert:
// every v1alpha1 request of this suite is converted by the webhook the operator serves
// (harness.Start registers it by URL on 127.0.0.1), and the operator itself reads and
// writes v1beta1.
package conversion_test

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

func TestConversion(t *testing.T) {
	RegisterFailHandler(Fail)
	// A pass that must happen (a status, an Event) gets 10 s, not Gomega's 1 s: a
	// first pass reads each name it creates past the cache (decide's claim), and CI runs
	// on 2 loaded cores.
	SetDefaultEventuallyTimeout(10 * time.Second)
	SetDefaultEventuallyPollingInterval(harness.PollInterval)
	RunSpecs(t, "v1alpha1 <-> v1beta1 through the operator's conversion webhook (envtest)")
}

var _ = BeforeSuite(func() {
	var err error
	env, err = harness.Start(true)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
})

func newNamespace() string {
	nsN++
	ns := fmt.Sprintf("conv-%d", nsN)
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	return ns
}
