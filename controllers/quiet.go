package controllers

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// quietLog logs each DGD's refusals once, at info, and paces their retries: a
// refusal the DGD's status already shows (WriteForbidden, NamespaceTerminating,
// ObserveFailed) would otherwise be a "Reconciler error" with a stack trace on every
// retry (issue 38: 300 of them while one namespace was deleted).
type quietLog struct {
	mu   sync.Mutex
	last map[types.NamespacedName]quietEntry
}

type quietEntry struct {
	msg   string
	tries int
}

// Backoff of a refusal's retries: quietFirst doubled per retry up to quietMax, as the
// work queue's default rate limiter would (5 ms to 1000 s), but starting where a
// refused write is worth trying again.
const (
	quietFirst = time.Second
	quietMax   = 5 * time.Minute
)

// note logs err for dgd unless it is the message logged last, and returns when to try
// again.
func (q *quietLog) note(ctx context.Context, dgd types.NamespacedName, err error) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.last == nil {
		q.last = map[types.NamespacedName]quietEntry{}
	}
	e := q.last[dgd]
	if e.msg != err.Error() {
		log.FromContext(ctx).Info("refused; shown on the DGD, retried with backoff", "error", err.Error())
		e = quietEntry{msg: err.Error()}
	}
	e.tries++
	q.last[dgd] = e
	wait := quietFirst << min(e.tries-1, 16)
	return min(wait, quietMax)
}

// clear forgets dgd's refusal once a pass goes through.
func (q *quietLog) clear(dgd types.NamespacedName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.last, dgd)
}
