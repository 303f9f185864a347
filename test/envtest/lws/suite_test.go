// Package lws_test runs the operator against a real API server with the LeaderWorkerSet
// CRD installed, playing the LWS controller by patching LeaderWorkerSet status.
package lws_test

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
	"github.com/dgd-rollout/operator/test/lws"
)

var (
	env *harness.Env
	ctx = context.Background()
	nsN int
)

func TestLeaderWorkerSetBackend(t *testing.T) {
	RegisterFailHandler(Fail)
	// A pass that must happen (a status, an Event) gets 10 s, not Gomega's 1 s: a
	// first pass reads each name it creates past the cache (decide's claim), and CI runs
	// on 2 loaded cores.
	SetDefaultEventuallyTimeout(10 * time.Second)
	SetDefaultEventuallyPollingInterval(harness.PollInterval)
	RunSpecs(t, "LeaderWorkerSet backend (envtest)")
}

var _ = BeforeSuite(func() {
	var err error
	env, err = harness.Start(true, lws.CRDPaths()...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
})

func newNamespace() string {
	nsN++
	ns := fmt.Sprintf("lws-%d", nsN)
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	return ns
}
