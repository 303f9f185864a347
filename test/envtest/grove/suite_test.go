// Package grove_test runs the operator against a real API server with Grove's CRDs
// installed. The test plays the Grove operator (creating the PodCliques and
// PodCliqueScalingGroups Grove would create, with Grove's names, and patching their
// status) and checks every PodCliqueSet update against Grove's validating webhook rules.
package grove_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

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
	RunSpecs(t, "Grove backend (envtest)")
}

var _ = BeforeSuite(func() {
	dir, err := grove.CRDDir()
	Expect(err).NotTo(HaveOccurred())
	// Grove's pods run here (the fake kubelet), so Dynamo's Kubernetes discovery does:
	// the fake EndpointSlice controller publishes their endpoints, and the operator
	// counts a worker ready only once its runtime pod is a ready endpoint.
	harness.OperatorDiscovery = render.DiscoveryKubernetes
	env, err = harness.Start(true, dir)
	if env != nil {
		env.RuntimeRegisters = true // every spec's namespace has an observer playing the runtimes
	}
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
	stopSlices, err := env.StartEndpointSlices(ctx)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(stopSlices)
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

func nsName(i int) string { return fmt.Sprintf("grove-%d", i) }

// newNamespace gives every spec its own namespace, observed as the Dynamo runtime
// would see it (test/observe: discovery from the EndpointSlices the fake EndpointSlice
// controller keeps, gang formation) until the spec ends.
func newNamespace() string {
	nsN++
	ns := nsName(nsN)
	o, err := observe.Start(ctx, observe.Options{Config: env.Config, Namespace: ns})
	Expect(err).NotTo(HaveOccurred())
	observers[ns] = o
	DeferCleanup(func() {
		o.Stop()
		GinkgoWriter.Printf("%s Dynamo observer: %+v\n", ns, o.Stats())
		// Fail with the violations last: a truncated log still shows them.
		if v := o.Violations(); len(v) > 0 {
			Fail(fmt.Sprintf("%s: what the Dynamo runtime would have seen (stats %+v):\n%s", ns, o.Stats(), strings.Join(v, "\n")))
		}
	})
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	return ns
}

// webhookRules sees every PodCliqueSet update and records what Grove's validating
// webhook rejects on a live PodCliqueSet: a change of clique composition (cliques or
// scaling groups added or removed) and changes of a clique's roleName, minAvailable or
// startsAfter, or of a scaling group's cliqueNames or minAvailable.
type webhookRules struct {
	mu      sync.Mutex
	found   []string
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
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(o, n any) {
		w.check(o.(*grovev1.PodCliqueSet), n.(*grovev1.PodCliqueSet))
	}})
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
	w.updates++
	if !cur.DeletionTimestamp.IsZero() {
		return
	}
	o, n := old.Spec.Template, cur.Spec.Template
	if names(o) != names(n) {
		w.found = append(w.found, fmt.Sprintf("%s: clique composition changed: %s -> %s", cur.Name, names(o), names(n)))
	}
	for _, oc := range o.Cliques {
		for _, nc := range n.Cliques {
			if oc.Name == nc.Name && (oc.Spec.RoleName != nc.Spec.RoleName || !equality.Semantic.DeepEqual(oc.Spec.MinAvailable, nc.Spec.MinAvailable) || !slices.Equal(oc.Spec.StartsAfter, nc.Spec.StartsAfter)) {
				w.found = append(w.found, fmt.Sprintf("%s: immutable field of clique %s changed", cur.Name, oc.Name))
			}
		}
	}
	for _, og := range o.PodCliqueScalingGroupConfigs {
		for _, ng := range n.PodCliqueScalingGroupConfigs {
			if og.Name == ng.Name && (!slices.Equal(og.CliqueNames, ng.CliqueNames) || !equality.Semantic.DeepEqual(og.MinAvailable, ng.MinAvailable)) {
				w.found = append(w.found, fmt.Sprintf("%s: immutable field of scaling group %s changed", cur.Name, og.Name))
			}
		}
	}
}

func (w *webhookRules) violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	GinkgoWriter.Printf("checked %d PodCliqueSet updates against Grove's webhook rules\n", w.updates)
	return append([]string(nil), w.found...)
}

func names(t grovev1.PodCliqueSetTemplateSpec) string {
	var out []string
	for _, c := range t.Cliques {
		out = append(out, c.Name)
	}
	for _, g := range t.PodCliqueScalingGroupConfigs {
		out = append(out, g.Name+"["+strings.Join(g.CliqueNames, ",")+"]")
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}
