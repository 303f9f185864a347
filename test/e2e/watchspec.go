package e2e

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
)

// WatchSpec starts a watcher of DGD ns/name with opts for the running Ginkgo spec (call
// it before the DGD is created, so it sees every event) and, when the spec ends,
// flushes it and fails the spec on any violation it saw. The envtest suites use it
// around each DGD they deploy.
func WatchSpec(ctx context.Context, cfg *rest.Config, ns, name string, opts Options) *Watcher {
	GinkgoHelper()
	w, err := WatchWith(ctx, cfg, ns, name, opts)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		Expect(w.Flush(ctx)).To(Succeed())
		w.Stop()
		st := w.Snapshot()
		GinkgoWriter.Printf("%s/%s watcher: %d events, %d pass boundaries, max skew %.2f\n", ns, name, st.Events, st.PassStates, st.MaxSkew)
		Expect(w.Violations()).To(BeEmpty(), "the live workloads of %s/%s", ns, name)
	})
	return w
}
