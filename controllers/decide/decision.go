package decide

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/controllers/planner"
)

// Decision is what one pass does, decided from a Snapshot alone.
type Decision struct {
	// Wait names a workload the cache does not show the operator's last write to yet:
	// the pass writes nothing, not even the status, and the workload's event (or a
	// timer) starts the next.
	Wait string
	// Needs is what Decide must observe more to decide (nothing else is set then): the
	// reconciler reads it into the snapshot and decides again.
	Needs Needs
	// Writes are the writes of the pass in the order they must be made: every decrease
	// before any increase, decode before prefill on the way up and after it on the way
	// down, so that surge, availability and a pool's two roles hold between any two of
	// them too.
	Writes []Write
	// Targets are the planner's replica count for every worker workload.
	Targets []planner.Target
	// Status is the status the pass leaves when every write is made (nil: none, the
	// spec is invalid before any revision was recorded).
	Status *v1alpha1.DynamoGraphDeploymentStatus
	// Events are emitted once the status is written; those marked Made also when it is
	// not. The Event of the writes made (Step) is filled in by Conclude.
	Events []Event
	// Metrics are the metrics the pass records.
	Metrics Metrics
	// Measured are the analysis measurements the pass took (for the log).
	Measured []Measured
	// Measure are the analysis measurements due now that the snapshot holds no result
	// for: the reconciler's measurement runner queries them off the pass
	// (controllers/measure.go), and a pass after the result lands takes it from
	// Snapshot.Measurements. The runner holds what the last pass listed, nothing more.
	Measure []MeasureNeed
	// Requeue is the soonest pass any part of this one asked for (0: none).
	Requeue time.Duration
	// Err, when set, fails the pass after its Writes: it is retried with backoff and
	// writes no status.
	Err error

	// report is what Conclude needs to fold an Outcome into the status.
	report report
}

// Needs is what Decide asks to observe before it can decide.
type Needs struct {
	// Names are workloads of a backend whose names depend on the cluster (Grove) that
	// the pass names: Backend.Name of each, into Snapshot.Names.
	Names []NameNeed
	// Unscheduled asks for the DGD's pods the scheduler could not place.
	Unscheduled bool
	// Holders are names the decision's writes would create objects under, into
	// Snapshot.Holders (claim).
	Holders []HolderNeed
}

// NameNeed is a workload whose name Decide needs.
type NameNeed struct {
	Backend string
	Key     backends.Key
}

// MeasureNeed is an analysis measurement due now: its query is run at At (the pass's
// clock when it was first found due), which the measurement records.
type MeasureNeed struct {
	Measure
	At time.Time
}

// Any reports whether anything is needed.
func (n Needs) Any() bool {
	return len(n.Names) > 0 || n.Unscheduled || len(n.Holders) > 0
}

// Metrics are what a pass records in the operator's metrics.
type Metrics struct {
	// RevisionsKept is the size of the DGD's history after the pass (-1: not synced).
	RevisionsKept int
	// Step: the pass moved worker replicas (dgd_rollout_steps_total).
	Step bool
}

// Measured is one measurement an analysis step took this pass.
type Measured struct {
	Metric, Query string
	Measurement   analysis.Measurement
}

// Event is one Event about the DGD.
type Event struct {
	// Type is Normal or Warning.
	Type, Reason, Message string
	// Made: the Event reports writes made, emitted whether or not the status write
	// succeeds (the pass that follows does not make them again).
	Made bool
	// Step marks where the Event of the pass's writes goes (Conclude fills it in).
	Step bool
}

// Op is what a Write does.
type Op string

// The writes a pass makes.
const (
	// CreateRevision stores Revision (revisions.Interface.Create), its worker hash
	// inherited as labelled (revisions.WithWorkerHash).
	CreateRevision Op = "CreateRevision"
	// RenumberRevision sets Revision's .revision to Number.
	RenumberRevision Op = "RenumberRevision"
	// SetChangeCause sets Revision's change cause to Cause.
	SetChangeCause Op = "SetChangeCause"
	// DeleteRevision deletes Revision.
	DeleteRevision Op = "DeleteRevision"
	// Relabel puts Workload.Relabel back on the workload's object (Backend.Relabel).
	Relabel Op = "Relabel"
	// Ensure makes Pool exist, rendered from From (Backend.Ensure).
	Ensure Op = "Ensure"
	// Scale sets Workload's replicas to Replicas (Backend.Scale).
	Scale Op = "Scale"
	// DeleteWorkload deletes the object holding Workload (Backend.Delete).
	DeleteWorkload Op = "DeleteWorkload"
	// ReleaseSubdomain tells Backend's workload Name that a Service of its name is gone.
	ReleaseSubdomain Op = "ReleaseSubdomain"
	// CreateObject creates Object (a Service, Ingress, ServiceAccount, Role,
	// RoleBinding or ConfigMap, owner references set); one that exists already made
	// nothing, and when it is someone else's and Controller is set, it is a name
	// conflict (Outcome.Conflicts).
	CreateObject Op = "CreateObject"
	// UpdateObject writes Object, the cached object with the pass's changes.
	UpdateObject Op = "UpdateObject"
	// DeleteObject deletes Object and, in the background, what it owns.
	DeleteObject Op = "DeleteObject"
	// CreateSSHKey creates the Secret Object names with a new SSH key (its content is
	// random: made when written).
	CreateSSHKey Op = "CreateSSHKey"
	// AnnounceStatus writes Status as the DGD's status before the writes after it (the
	// pass's own status comes only once every write is made): Recreate's Ready False
	// (ReasonRecreating) before its first write that takes running pods away. The
	// pass's status is then written over it.
	AnnounceStatus Op = "AnnounceStatus"
	// ReleaseDynamo ends the take-over of a DGD from Dynamo's operator (dynamo.go): its
	// DCDs (Names) deleted, their finalizer removed, and its finalizer removed from the
	// DGD.
	ReleaseDynamo Op = "ReleaseDynamo"
)

// Write is one write of a pass. Which fields are set depends on Op.
type Write struct {
	Op Op
	// Backend is the Kind of the backend of a workload write.
	Backend string
	// Revision, Number, Cause: the revision writes; Collisions is the collision count
	// a revision is created with (revisions.Interface.Create).
	Revision   *appsv1.ControllerRevision
	Number     int64
	Cause      string
	Collisions int32
	// Pool and From: Ensure's pool and the DGD its services render from (the spec's,
	// or an aborted rollout's stable revision restored).
	Pool backends.Pool
	From *v1alpha1.DynamoGraphDeployment
	// Workload and Replicas: Relabel, Scale and DeleteWorkload; Name: ReleaseSubdomain.
	Workload backends.Workload
	Replicas int32
	Name     string
	// Object and Kind: the object writes. Controller: the DGD is to be Object's
	// controller (else one of its owners).
	Object     client.Object
	Kind       string
	Controller bool
	// Orphan: DeleteObject leaves what Object owns (propagation Orphan): Dynamo's
	// Deployment whose name ours needs, its pods still serving.
	Orphan bool
	// Names: ReleaseDynamo's DCDs.
	Names []string
	// Status: AnnounceStatus's status.
	Status *v1alpha1.DynamoGraphDeploymentStatus
	// Say is what the write says in the pass's Event once made; Progress marks a
	// workload write (rollout progress, RolloutStep) rather than an object's.
	Say      []string
	Progress bool
	// Expect are the replica counts the cache must show, by workload name, before a
	// pass acts again (a scale, a create); Forget the workloads whose expectations the
	// write ends (a delete).
	Expect map[string]int32
	Forget []string
}

// String is a short, stable form of the write (golden tests, logs).
func (w Write) String() string {
	switch w.Op {
	case CreateRevision, DeleteRevision:
		return fmt.Sprintf("%s %s #%d", w.Op, w.Revision.Name, w.Revision.Revision)
	case RenumberRevision:
		return fmt.Sprintf("%s %s #%d", w.Op, w.Revision.Name, w.Number)
	case SetChangeCause:
		return fmt.Sprintf("%s %s %q", w.Op, w.Revision.Name, w.Cause)
	case Ensure:
		var parts []string
		for _, sw := range w.Pool.Services {
			if sw.InPlace {
				parts = append(parts, fmt.Sprintf("%s=%d in place", sw.Service, sw.Replicas))
				continue
			}
			parts = append(parts, fmt.Sprintf("%s=%d", sw.Service, sw.Replicas))
		}
		return fmt.Sprintf("%s %s %s[%s]", w.Op, w.Backend, poolName(w.Pool), strings.Join(parts, " "))
	case Scale:
		return fmt.Sprintf("%s %s %s %d->%d", w.Op, w.Backend, w.Workload.Name, w.Workload.Replicas, w.Replicas)
	case Relabel, DeleteWorkload:
		return fmt.Sprintf("%s %s %s", w.Op, w.Backend, w.Workload.Name)
	case ReleaseSubdomain:
		return fmt.Sprintf("%s %s %s", w.Op, w.Backend, w.Name)
	case ReleaseDynamo:
		return fmt.Sprintf("%s %v", w.Op, w.Names)
	case DeleteObject:
		if w.Orphan {
			return fmt.Sprintf("%s %s %s (orphan)", w.Op, w.Kind, w.Object.GetName())
		}
	case AnnounceStatus:
		if c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			return fmt.Sprintf("%s Ready=%s %s", w.Op, c.Status, c.Reason)
		}
		return string(w.Op)
	}
	return fmt.Sprintf("%s %s %s", w.Op, w.Kind, w.Object.GetName())
}

func poolName(p backends.Pool) string {
	if p.Hash == "" {
		return "stable"
	}
	return p.Hash
}

// Outcome is what the reconciler made of a Decision's writes.
type Outcome struct {
	// Progress and Objects are what the writes made said (Write.Say), in order: those
	// of workload writes and those of object writes. A create that found its object
	// there made nothing and says nothing.
	Progress, Objects []string
	// Conflicts are objects a create found under their name, someone else's: reported,
	// left alone, and the pass goes on.
	Conflicts []*backends.NameConflictError
	// Stopped is a write's finding that the DGD cannot go on until something changes
	// (a workload name someone else holds, *backends.NameConflictError; a spec a
	// backend cannot run, *backends.SpecError): no write after it was made.
	Stopped error
	// Collided, when set, is the collision count at which a revision's create found its
	// name taken by another template the list did not show (revisions.Interface.Create
	// moved it there): no write after it was made, the status keeps the count, and the
	// next pass decides from the revision as created.
	Collided *int32
	// Made counts the writes made, in order, before the one that failed (all of them
	// when none failed).
	Made int
	// Refused is a write the API server refused (400, 403, 413, 422; see Refusal): no
	// write after it was made, and the status says which and why.
	Refused error
	// Err is a write's failure: no write after it was made.
	Err error
}

// Report is what a pass reports once its writes are made (Conclude).
type Report struct {
	// Status is the status to write (nil: none); a status equal to the one read needs
	// no write.
	Status *v1alpha1.DynamoGraphDeploymentStatus
	// Events to emit; when the status write fails, only those marked Made.
	Events []Event
	// Requeue is the soonest next pass (0: none).
	Requeue time.Duration
	// Retry is an error the pass returns to the work queue (a retry with backoff) once
	// the status is written: a forbidden write.
	Retry error
}

// report is what Conclude needs of the pass besides the Decision: the DGD as read, the
// clock, and the name conflicts Decide found.
type report struct {
	dgd       *v1alpha1.DynamoGraphDeployment
	now       time.Time
	conflicts []string
	// stopped: the status is a stopped pass's (InvalidSpec): conflicts the writes find
	// do not change it.
	stopped bool
}
