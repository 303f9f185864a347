package reliability_test

import (
	"context"
	"fmt"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/harness"
)

// tracer wraps the operator's reconciler (controllers.Reconciler.Middleware) and records
// which DGDs are being reconciled at every moment: the same DGD twice at once is an
// overlap; the most DGDs at once shows the workers really run side by side.
type tracer struct {
	mu         sync.Mutex
	inFlight   map[string]int
	running    int
	maxRunning int
	overlaps   []string
}

func newTracer() *tracer { return &tracer{inFlight: map[string]int{}} }

func (t *tracer) wrap(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
		key := req.String()
		t.mu.Lock()
		t.inFlight[key]++
		if t.inFlight[key] > 1 {
			t.overlaps = append(t.overlaps, fmt.Sprintf("%s reconciled %d times at once", key, t.inFlight[key]))
		}
		t.running++
		t.maxRunning = max(t.maxRunning, t.running)
		t.mu.Unlock()
		defer func() {
			t.mu.Lock()
			t.inFlight[key]--
			t.running--
			t.mu.Unlock()
		}()
		return r.Reconcile(ctx, req)
	})
}

// resetMax starts a new measure of the most DGDs reconciled at once.
func (t *tracer) resetMax() { t.mu.Lock(); t.maxRunning = t.running; t.mu.Unlock() }

func (t *tracer) max() int { t.mu.Lock(); defer t.mu.Unlock(); return t.maxRunning }

func (t *tracer) overlapsSeen() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.overlaps...)
}

var _ = Describe("concurrent reconciles", func() {
	It("rolls twelve graphs changed at once on several workers, never one graph on two", func() {
		withFaults(func() {
			ns := newNamespace()
			var names []string
			for i := 0; i < 12; i++ {
				obj := harness.NewDGD(ns, fmt.Sprintf("g%02d", i)).Disagg(2, 1, "vllm:v1").Rollout("1", "0").Obj()
				deploy(obj)
				names = append(names, obj.Name)
			}
			trace.resetMax()
			for _, name := range names {
				update(ns, name, func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
			}
			for _, name := range names {
				_, err := drive(ns, name, -1, maxSteps, harness.CompletedAt(2))
				Expect(err).NotTo(HaveOccurred(), name)
			}
			Expect(trace.max()).To(BeNumerically(">", 1), "the graphs were reconciled one at a time")
			Expect(trace.overlapsSeen()).To(BeEmpty())
		})
	})
})
