package decide

import (
	"time"

	"github.com/dgd-rollout/operator/backends"
)

// draft is a Decision as Decide builds it, stage by stage: every stage adds its writes,
// Events and requests here, and nothing else is shared between stages but values.
type draft struct {
	Decision
	// progress are the Say of the workload writes planned so far (rollout progress):
	// whether the pass moved anything decides its phase, its progress time and its
	// Event.
	progress []string
	// conflicts are the objects the DGD needs that are someone else's, each one's
	// message (backends.NameConflictError).
	conflicts []string
	// deleted are the objects (groupOf) the pass deletes.
	deleted map[string]bool
	// takeOverHeld says why the take-over from Dynamo's operator waits (condition
	// TakeOverHeld), "" when it does not.
	takeOverHeld string
	// made are the workloads updateCohortFronts creates (a cohort frontend's new
	// template beside its old one, a frontend for workers that ran without one): what
	// the pass leaves has them (result), as it has the prelude's and the plan's
	// (moves.created).
	made []Workload
}

func newDraft() *draft {
	return &draft{Decision: Decision{Metrics: Metrics{RevisionsKept: -1}}, deleted: map[string]bool{}}
}

// write adds w to the pass's writes.
func (d *draft) write(w Write) {
	d.Writes = append(d.Writes, w)
	if w.Progress {
		d.progress = append(d.progress, w.Say...)
	}
}

// announced reports whether the pass writes a status before its other writes already
// (AnnounceStatus).
func (d *draft) announced() bool {
	for _, w := range d.Writes {
		if w.Op == AnnounceStatus {
			return true
		}
	}
	return false
}

// event queues an Event, emitted once the pass's status is written.
func (d *draft) event(typ, reason, msg string) {
	d.Events = append(d.Events, Event{Type: typ, Reason: reason, Message: msg})
}

// requeueIn asks for a pass within dur: the pass ends with the soonest of its requests.
func (d *draft) requeueIn(dur time.Duration) {
	d.Requeue = soonest(d.Requeue, dur)
}

func soonest(a, b time.Duration) time.Duration {
	if b > 0 && (a == 0 || b < a) {
		return b
	}
	return a
}

// ConflictRecheck is how often a DGD with a name conflict looks again: the object in
// its way is none of its own, so no event of its watches says when it is gone.
const ConflictRecheck = 30 * time.Second

// conflict records an object the DGD needs that is someone else's: the pass goes on
// without it (nothing is adopted, changed or deleted), and its status says so.
func (d *draft) conflict(e *backends.NameConflictError) {
	d.conflicts = append(d.conflicts, e.Error())
	d.requeueIn(ConflictRecheck)
}
