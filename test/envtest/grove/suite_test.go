// Package grove_test runs the operator against a real API server with Grove's CRDs
// installed. The test plays the Grove operator (creating the PodCliques and
// PodCliqueScalingGroups Grove would create, with Grove's names, and patching their
// status) and checks every PodCliqueSet update against Grove's validating webhook rules.
package grove_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/test/gateway"
	"github.com/dgd-rollout/operator/test/grove"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/test/observe"
)

var (
	env      *harness.Env
	ctx      = context.Background()
	nsN      int
	rejected = &webhookRules{}
	belowMin = &cliquesBelowMinAvailable{found: map[string]bool{}}
	// observers holds each spec namespace's Dynamo observer.
	observers = map[string]*observe.Observer{}
)

func TestGroveBackend(t *testing.T) {
	RegisterFailHandler(Fail)
	// A pass that must happen (a status, an Event) gets 10 s, not Gomega's 1 s: a
	// first pass reads each name it creates past the cache (decide's claim), and CI runs
	// on 2 loaded cores.
	SetDefaultEventuallyTimeout(10 * time.Second)
	SetDefaultEventuallyPollingInterval(harness.PollInterval)
	RunSpecs(t, "Grove backend (envtest)")
}

var _ = BeforeSuite(func() {
	dir, err := grove.CRDDir()
	Expect(err).NotTo(HaveOccurred())
	// The Gateway API's CRDs, so that the operator registers its Gateway API traffic
	// provider (app.Providers), and the test Gateway controller judging routes of class
	// gatewayClass (cohorts_test.go).
	gwDir, err := gateway.CRDDir()
	Expect(err).NotTo(HaveOccurred())
	// Grove's pods run here (the fake kubelet), so Dynamo's Kubernetes discovery does:
	// the fake EndpointSlice controller publishes their endpoints, and the operator
	// counts a worker ready only once its runtime pod is a ready endpoint.
	harness.OperatorDiscovery = render.DiscoveryKubernetes
	env, err = harness.Start(true, dir, gwDir)
	if env != nil {
		env.RuntimeRegisters = true // every spec's namespace has an observer playing the runtimes
	}
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
	// Grove's two 5 s requeues (harness.DefaultGroveTiming) at 200 ms: the order of what
	// the fake does is Grove's either way (no PodClique before the token, a scaled
	// gang's pods gated until the base gang is scheduled), only the wait is shorter.
	// The fidelity spec that times the token wait runs at Grove's 5 s (realTiming). At
	// Grove's 5 s the suite took 454 s in a cold make test, at 200 ms 158 s (Dec 2,
	// 2026); the cohorts spec still fails on the prelude retiring the shared frontend
	// before the cohort's is ready (decide.cohortReplaces always true).
	env.SetGroveTiming(harness.FastGroveTiming)
	stopSlices, err := env.StartEndpointSlices(ctx)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(stopSlices)
	Expect(env.Client.Create(ctx, gateway.GatewayClass(gatewayClass, gatewayController))).To(Succeed())
	gwc := &gateway.Controller{Name: gatewayController, Delay: 100 * time.Millisecond}
	stopGateway, err := gwc.Start(env.Config)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(stopGateway()).To(Succeed()) })
	Expect(rejected.watch(env)).To(Succeed())
	stop, err := env.Watch(ctx, "", belowMin.check, &grovev1.PodClique{}, &grovev1.PodCliqueScalingGroup{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(stop)
})

var _ = AfterSuite(func() {
	Expect(rejected.violations()).To(BeEmpty(), "writes Grove's validating webhook would reject")
	Expect(belowMin.list()).To(BeEmpty(), "cliques set below their minAvailable (Grove arms gang termination)")
	Expect(groveWarnings()).To(BeEmpty(), "Warning events Grove emits (AllScheduledReplicasLost...)")
})

// realTiming runs the rest of the spec with Grove's own waits.
func realTiming() {
	env.SetGroveTiming(harness.DefaultGroveTiming)
	DeferCleanup(func() { env.SetGroveTiming(harness.FastGroveTiming) })
}

func nsName(i int) string { return fmt.Sprintf("grove-%d", i) }

// maxLagGaps bounds the gaps per spec that the observer proves to be discovery lag (no
// ready generation while every pod, Service and slice the frontend last routed through
// is still there). The slices here are derived from the Services and pods at each state,
// so lag can only come from the observer's caches: measured 0 in every spec.
const maxLagGaps = 1

// newNamespace gives every spec its own namespace, observed as the Dynamo runtime
// would see it (test/observe: discovery from the EndpointSlices the fake EndpointSlice
// controller keeps, gang formation) until the spec ends.
func newNamespace() string { return newNamespaceChecked(nil) }

// newNamespaceChecked is newNamespace whose observer also judges every state with check
// (observe.Options.Check).
func newNamespaceChecked(check func(observe.State) []string) string {
	nsN++
	ns := nsName(nsN)
	observeNamespace(ns, check)
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	return ns
}

// observeNamespace starts the namespace's observer; its violations fail the spec when
// it ends. A spec that builds a state by hand (one no operator made, such as a Service
// deleted under a running revision) stops the observer first (observers[ns].Stop(): what
// it saw until then still counts) and observes afresh once the state is built.
func observeNamespace(ns string, check func(observe.State) []string) {
	o, err := observe.Start(ctx, observe.Options{Config: env.Config, Namespace: ns, Check: check})
	Expect(err).NotTo(HaveOccurred())
	observers[ns] = o
	DeferCleanup(func() {
		o.Stop()
		st := o.Stats()
		GinkgoWriter.Printf("%s Dynamo observer: %+v\n", ns, st)
		AddReportEntry("lag gaps", fmt.Sprintf("%s: %d lag gaps (%d states, %s)", ns, st.LagGaps, st.LagGapStates, st.LagGapTime))
		// Fail with the violations last: a truncated log still shows them.
		if v := o.Violations(); len(v) > 0 {
			Fail(fmt.Sprintf("%s: what the Dynamo runtime would have seen (stats %+v):\n%s", ns, st, strings.Join(v, "\n")))
		}
		Expect(st.LagGaps).To(BeNumerically("<=", maxLagGaps), "gaps proven to be discovery lag: %v", st.LagGapCauses)
	})
}

// webhookRules sees every PodCliqueSet create and update and records what Grove's
// validating webhook would reject (harness.GroveRejects: the create-time rules on
// every write, the immutable fields and clique composition on updates).
type webhookRules struct {
	mu      sync.Mutex
	found   []string
	creates int
	updates int
}

func (w *webhookRules) watch(e *harness.Env) error {
	c, err := cache.New(e.Config, cache.Options{Scheme: app.NewScheme()})
	if err != nil {
		return err
	}
	inf, err := c.GetInformer(ctx, &grovev1.PodCliqueSet{})
	if err != nil {
		return err
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		// Started before any spec, the informer's adds are the creates.
		AddFunc:    func(o any) { w.check(nil, o.(*grovev1.PodCliqueSet)) },
		UpdateFunc: func(o, n any) { w.check(o.(*grovev1.PodCliqueSet), n.(*grovev1.PodCliqueSet)) },
	})
	if err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	DeferCleanup(cancel)
	go func() { _ = c.Start(cctx) }()
	c.WaitForCacheSync(cctx)
	return nil
}

func (w *webhookRules) check(old, cur *grovev1.PodCliqueSet) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if old == nil {
		w.creates++
	} else {
		w.updates++
	}
	if !cur.DeletionTimestamp.IsZero() || old != nil && equality.Semantic.DeepEqual(old.Spec, cur.Spec) {
		return // a deletion, or a write of metadata or status the webhook does not judge
	}
	for _, v := range harness.GroveRejects(old, cur) {
		w.found = append(w.found, cur.Namespace+"/"+cur.Name+": "+v)
	}
}

func (w *webhookRules) violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	GinkgoWriter.Printf("checked %d PodCliqueSet creates and %d updates against Grove's webhook rules\n", w.creates, w.updates)
	return append([]string(nil), w.found...)
}
