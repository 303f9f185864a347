// Package reliability_test runs the operator against a real API server (envtest) with a
// client that fails a share of its writes (test/faults): 500 InternalError, 429
// TooManyRequests and 409 Conflict before the write, and 500 or 504 after it was
// applied (its answer lost), on creates, updates, patches, deletes, scale and status
// writes. The suite plays the workload controllers step by step (Deployments,
// LeaderWorkerSets and Grove, as the envtest suites of each backend do) and checks
// surge, availability and ratio at every settled step, surge at every write, and after
// each rollout that nothing is duplicated or left behind; it also plays a human who
// scales, deletes and relabels the operator's objects by hand.
//
// The manager is built here rather than by harness.Start(true): it is the operator's
// own wiring (app.NewReconciler) with the faulty client handed to the reconciler, every
// backend (Deployment, LeaderWorkerSet, Grove) and the revision history. Reads come
// from the manager's cache, untouched.
//
// FAULT_RATE (default 0.05), FAULT_AFTER_COMMIT (the share of faults after commit,
// default 0.3) and FAULT_SEED (default 7) change the faults. The specs in bugs_test.go
// reproduce operator bugs this suite found (all fixed).
package reliability_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/dgd-rollout/operator/api/conversion"
	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/deployment"
	grovebackend "github.com/dgd-rollout/operator/backends/grove"
	lwsbackend "github.com/dgd-rollout/operator/backends/lws"
	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/revisions"
	"github.com/dgd-rollout/operator/test/faults"
	"github.com/dgd-rollout/operator/test/grove"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/test/lws"
)

var (
	env    *harness.Env
	faulty *faults.Client
	ctx    = context.Background()
	nsN    int

	trace *tracer

	// rate is the share of the operator's writes that fail in the rollout scenarios.
	rate        = envFloat("FAULT_RATE", defaultRate)
	afterCommit = envFloat("FAULT_AFTER_COMMIT", defaultAfterCommit)
	seed        = uint64(envFloat("FAULT_SEED", defaultSeed))

	// bugIt marks a spec that reproduces an operator bug this suite found; they are
	// fixed, so the specs run as regressions.
	bugIt = It
)

// The default faults, whose counts docs/testing.md states (expectReadmeCounts).
const (
	defaultRate        = 0.05
	defaultAfterCommit = 0.3
	defaultSeed        = 7
)

func envFloat(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil {
		return v
	}
	return def
}

func TestReliability(t *testing.T) {
	if os.Getenv("RUN_KNOWN_BUGS") != "" {
		bugIt = It
	}
	RegisterFailHandler(Fail)
	// A pass that must happen (a status, an Event) gets 10 s, not Gomega's 1 s: a
	// first pass reads each name it creates past the cache (decide's claim), and CI runs
	// on 2 loaded cores.
	SetDefaultEventuallyTimeout(10 * time.Second)
	SetDefaultEventuallyPollingInterval(harness.PollInterval)
	RunSpecs(t, "Reliability: faulty API writes and manual interference (envtest)")
}

var _ = BeforeSuite(func() {
	// Faults slow a rollout down (each failed pass is retried with backoff): give the
	// operator more time to act on a change than the plain suites do.
	harness.SettleTimeout = 60 * time.Second
	lwsCRDs, err := lws.CRDDir()
	Expect(err).NotTo(HaveOccurred())
	groveCRDs, err := grove.CRDDir()
	Expect(err).NotTo(HaveOccurred())
	env, err = harness.Start(false, lwsCRDs, groveCRDs)
	Expect(err).NotTo(HaveOccurred())
	// Grove's token and gate waits (5 s each) test nothing here.
	env.SetGroveTiming(harness.FastGroveTiming)
	// Injected faults make the reconciler log errors with stack traces: keep them with
	// the spec's output (shown on failure or with -ginkgo.v), not on stderr.
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true), zap.Level(zapcore.ErrorLevel)))
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })

	// The kinds this envtest serves (no Gateway API CRDs here), as cmd/manager does.
	cacheOpts, err := app.CacheOptionsFor(env.Config)
	Expect(err).NotTo(HaveOccurred())
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 app.NewScheme(),
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	Expect(err).NotTo(HaveOccurred())
	faulty = faults.New(mgr.GetClient(), faults.Config{Rate: rate, Seed: seed, AfterCommitShare: afterCommit})
	// No pods here (the suite plays workload statuses): etcd discovery, where the
	// workloads' readiness is what Dynamo routes by (harness.OperatorDiscovery).
	platform := render.Config{DiscoveryBackend: harness.OperatorDiscovery}
	r, err := app.NewReconciler(mgr, app.Options{Platform: platform})
	Expect(err).NotTo(HaveOccurred())
	// As app.Setup wires it: DGDs read and written as v1beta1.
	r.Client, r.History = conversion.NewClient(faulty), revisions.NewHistory(faulty, mgr.GetScheme())
	r.Backends = backends.NewRegistry().
		Register(v1alpha1.BackendDeployment, deployment.New(faulty, mgr.GetAPIReader(), mgr.GetScheme(), platform)).
		Register(v1alpha1.BackendLeaderWorkerSet, lwsbackend.New(faulty, mgr.GetScheme(), platform)).
		Register(v1alpha1.BackendGrove, grovebackend.New(faulty, mgr.GetScheme(), platform))
	// As many workers as the operator runs by default; trace checks that no DGD is ever
	// reconciled by two of them at once, over every spec of the suite.
	trace = newTracer()
	r.Middleware = trace.wrap
	Expect(r.SetupWithManager(mgr, app.DefaultTuning.Workers)).To(Succeed())
	DeferCleanup(func() { Expect(trace.overlapsSeen()).To(BeEmpty(), "a DGD reconciled by two workers at once") })
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	DeferCleanup(func() {
		cancel()
		Expect(<-done).To(Succeed())
	})
	start := time.Now()
	DeferCleanup(func() {
		st := faulty.Stats()
		fmt.Printf("faults (rate %.2f, %.2f of them after commit, seed %d) over the suite, %s: %s\n", rate, afterCommit, seed, time.Since(start).Round(time.Second), st)
		AddReportEntry("faults injected", st.String())
		if rate > 0 {
			Expect(st.Injected).To(BeNumerically(">", 0), "no fault was injected")
		}
		if suite, _ := GinkgoConfiguration(); rate == defaultRate && afterCommit == defaultAfterCommit && seed == defaultSeed &&
			len(suite.FocusStrings)+len(suite.SkipStrings)+len(suite.FocusFiles)+len(suite.SkipFiles) == 0 && suite.LabelFilter == "" {
			expectReadmeCounts(st) // the default run, whole
		}
	})
})

// newNamespace gives every spec its own namespace.
func newNamespace() string {
	nsN++
	ns := fmt.Sprintf("rel-%d", nsN)
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	return ns
}

// withFaults runs body at the suite's fault rate and reports the faults injected into
// the writes it caused.
func withFaults(body func()) {
	faulty.SetRate(rate)
	before := faulty.Stats()
	defer func() {
		d := faulty.Stats().Sub(before)
		AddReportEntry("faults", d.String())
		fmt.Fprintf(GinkgoWriter, "faults: %s\n", d)
	}()
	body()
}
