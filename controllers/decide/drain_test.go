package decide_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// TestTimedDrainEnds: through a provider that cannot see requests in flight (a
// Gateway), the old cohort drains for a fixed time once its weight 0 is in effect, and
// that time is counted from when the drain began (status.cohorts[].drainingSince), not
// from each pass: the rollout completes. Before, a cohort the plan took to zero fell
// out of status.cohorts, so every pass started its drain afresh and the rollout sat at
// TrafficDraining (found by the e2e Gateway spec with drainSeconds 1).
func TestTimedDrainEnds(t *testing.T) {
	for _, mode := range []v1alpha1.FrontendMode{v1alpha1.FrontendsAuto, v1alpha1.FrontendsPerRevision} {
		for _, g := range [][2]int32{{2, 2}, {2, 1}} {
			t.Run(fmt.Sprintf("%s/%dP%dD", mode, g[0], g[1]), func(t *testing.T) { timedDrain(t, mode, g[0], g[1]) })
		}
	}
}

func timedDrain(t *testing.T, mode v1alpha1.FrontendMode, p, d int32) {
	w := settledWorld(t, disagg(p, d).Obj())
	w.agent = true
	if mode != v1alpha1.FrontendsAuto {
		walkAll(t, w, frontends(mode))
	}
	w.inflightUnknown = true
	w.edit(upgrade("7"))
	var since *time.Time
	for pass := 0; pass < 120; pass++ {
		w.step(t, true)
		ru := w.dgd.Status.RollingUpdate
		for _, cs := range w.dgd.Status.Cohorts {
			if cs.DrainingSince == nil {
				continue
			}
			if since != nil && !cs.DrainingSince.Time.Equal(*since) {
				t.Fatalf("pass %d: drainingSince moved from %s to %s", pass, since, cs.DrainingSince.Time)
			}
			since = &cs.DrainingSince.Time
		}
		if ru != nil && ru.Phase == v1alpha1.RolloutCompleted && w.dgd.Status.ObservedGeneration == w.dgd.Generation {
			if since == nil {
				t.Fatal("completed without the old cohort ever draining")
			}
			if took := w.now.Sub(*since); took < 30*time.Second {
				t.Errorf("the drain took %s of the world's clock, want the default 30s at least", took)
			}
			return
		}
	}
	t.Fatalf("not completed after 120 passes: %+v", w.dgd.Status.RollingUpdate)
}

// walkAll makes a change and plays passes until the world settles.
func walkAll(t *testing.T, w *world, change func(*v1alpha1.DynamoGraphDeployment)) {
	t.Helper()
	walk(t, w, "", change, nil)
}
