package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/dgd-rollout/operator/traffic/proxy"
)

// fieldManager is the agents' field manager on the status ConfigMap.
const fieldManager = "dgd-rollout-proxy-agent"

// reporter writes the agent's report into the status ConfigMap, its own key alone (a
// JSON merge patch, RFC 7386: the other agents' keys are left as they are). It sends
// a report that changes what is applied (version, weights, cohorts, header route,
// error) at once, and one that only says a draining cohort's requests in flight
// changed no sooner than ReportInterval after the last it sent. It sends the newest
// report only, and retries a failed write with backoff.
type reporter struct {
	cs       kubernetes.Interface
	o        Options
	mu       sync.Mutex
	latest   *proxy.Report // the last report accepted, sent or not
	pending  *proxy.Report // the newest report not yet sent
	due      time.Time     // when pending may be sent
	lastSent time.Time
	kick     chan struct{}
}

func newReporter(cs kubernetes.Interface, o Options) *reporter {
	return &reporter{cs: cs, o: o, kick: make(chan struct{}, 1)}
}

// offer hands the reporter a pass's report; it is dropped when it says nothing new.
func (r *reporter) offer(rep proxy.Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.latest == nil || applyChanged(*r.latest, rep):
		r.due = time.Time{}
	case drainMoved(*r.latest, rep):
		if r.pending == nil {
			r.due = r.lastSent.Add(r.o.ReportInterval)
		}
	default:
		return
	}
	r.latest, r.pending = &rep, &rep
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// applyChanged: b says something else than a of what HAProxy applies.
func applyChanged(a, b proxy.Report) bool {
	if a.Version != b.Version || a.Error != b.Error || a.HeaderRoute != b.HeaderRoute || len(a.Cohorts) != len(b.Cohorts) {
		return true
	}
	for hash, c := range b.Cohorts {
		old, ok := a.Cohorts[hash]
		if !ok || old.Weight != c.Weight || old.Removing != c.Removing {
			return true
		}
	}
	return false
}

// drainMoved: a draining cohort's requests in flight differ between a and b.
func drainMoved(a, b proxy.Report) bool {
	for hash, c := range b.Cohorts {
		if (c.Removing || drains(b, hash)) && a.Cohorts[hash].InFlight != c.InFlight {
			return true
		}
	}
	return false
}

// drains: the cohort takes no new request (weight 0 and not the header route's).
func drains(r proxy.Report, hash string) bool {
	return r.Cohorts[hash].Weight == 0 && r.HeaderRoute != hash
}

// next is the report to send and how long to wait before sending it.
func (r *reporter) next() (*proxy.Report, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending, time.Until(r.due)
}

// sent records rep as written, unless a newer report replaced it meanwhile.
func (r *reporter) sent(rep *proxy.Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == rep {
		r.pending = nil
	}
	r.lastSent = time.Now()
}

// run sends reports until ctx ends.
func (r *reporter) run(ctx context.Context) {
	backoff := backoffMin
	for {
		rep, wait := r.next()
		if rep == nil || wait > 0 {
			if rep == nil {
				wait = time.Hour
			}
			select {
			case <-ctx.Done():
				return
			case <-r.kick:
			case <-time.After(wait):
			}
			continue
		}
		if err := r.write(ctx, rep); err != nil {
			r.o.Log.Info("report failed, retrying", "in", backoff, "error", err.Error())
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = backoffMin
		r.sent(rep)
	}
}

// write merges rep under the pod's key.
func (r *reporter) write(ctx context.Context, rep *proxy.Report) error {
	value, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"data": map[string]string{r.o.PodName: string(value)}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = r.cs.CoreV1().ConfigMaps(r.o.Namespace).Patch(ctx, r.o.StatusConfigMap, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil {
		return fmt.Errorf("patching ConfigMap %s/%s: %w", r.o.Namespace, r.o.StatusConfigMap, err)
	}
	r.o.Log.V(1).Info("reported", "version", rep.Version, "cohorts", rep.Cohorts)
	return nil
}
