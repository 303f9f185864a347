package decide

import (
	"fmt"
	"sort"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/planner"
)

// Taking over a graph Dynamo's operator runs on Grove: one PodCliqueSet named after the
// DGD holds every component of it, frontend included (ai-dynamo/dynamo
// deploy/operator/internal/dynamo/graph.go GenerateGrovePodCliqueSet). Observe reports
// each worker component's PodClique or PodCliqueScalingGroup as a workload of
// DynamoBackend grouped under that PodCliqueSet (revision 0, as on the other
// pathways), with the least replicas Grove keeps it whole at (Dynamo.Floors). Ours
// rolls out beside it in our own PodCliqueSets, and the planner moves replicas over as
// usual; here:
//   - a component of Dynamo's is never scaled below its floor (its minAvailable): below
//     it Grove arms gang termination of the PodCliqueSet's replica, which would take
//     Dynamo's frontend and every other component with it; the planner's lower target
//     waits at the floor;
//   - Dynamo's PodCliqueSet is deleted whole (UID precondition), never clique by clique,
//     once the plan drains every worker of it and every component of ours is ready: its
//     frontend clique serves until ours does, so there is never a moment without a
//     ready frontend;
//   - shapes the floor would deadlock are held (dynamoGroveBlocked).

// dynamoGrove reports whether w is a component of Dynamo's PodCliqueSet.
func dynamoGrove(w Workload) bool {
	return w.Backend == DynamoBackend && w.Group != nil
}

// dynamoFloor is the least replicas w may be scaled to: its floor for a component of
// Dynamo's PodCliqueSet, else 0.
func (v *view) dynamoFloor(w Workload) int32 {
	if v.Dynamo == nil || !dynamoGrove(w) {
		return 0
	}
	return v.Dynamo.Floors[w.Name]
}

// decreaseDynamoGrove decides one component of Dynamo's PodCliqueSet in decreases: the
// PodCliqueSet deleted once drained and ours ready, else scaled towards the plan's
// target, never below its floor.
func decreaseDynamoGrove(v *view, c course, plan planner.Plan, d *draft, w Workload, drained bool) {
	if drained && oursReady(v, c) == "" {
		deleteWorkload(v, d, w, "Dynamo's operator's workers drained and every component of ours ready")
		return
	}
	if drained {
		d.requeueIn(DynamoRecheck)
	}
	if t := max(v.targetOf(c.h, plan, w), v.dynamoFloor(w)); t < w.Replicas {
		scale(d, w, t)
	}
}

// oursReady says which component of the goal revision is not ready yet, or "": every
// worker's ready replicas of the goal revision (as Dynamo routes to them) and every
// stable service's of its current template reach the spec's replicas.
func oursReady(v *view, c course) string {
	goal := c.h.goalHash()
	names := c.goalDGD.ServiceNames()
	sort.Strings(names)
	for _, name := range names {
		svc := c.goalDGD.Spec.Services[name]
		var ready int32
		for _, w := range v.Workloads {
			if w.Service != name || w.Backend == DynamoBackend || w.Terminating {
				continue
			}
			if svc.IsWorker() && w.Hash == goal || !svc.IsWorker() && w.Hash == "" && !w.Outdated {
				ready += min(w.Ready, w.Replicas)
			}
		}
		if ready < svc.DesiredReplicas() {
			return fmt.Sprintf("%s has %d of %d ready", name, ready, svc.DesiredReplicas())
		}
	}
	return ""
}

// dynamoGroveBlocked is why Dynamo's PodCliqueSet cannot be taken over under the DGD's
// rollout, or "". A component of it waits at its floor f while the plan would take it
// lower, so ours must be able to reach the spec's replicas beside f of Dynamo's: the
// service's maxSurge must be at least f (maxSurge 0 drains the old replica first,
// which the floor forbids: the take-over would wait for good). Recreate takes the old
// revision to zero before ours starts, which cannot be done inside a PodCliqueSet that
// also runs Dynamo's frontend.
func dynamoGroveBlocked(s *Snapshot) string {
	if s.Dynamo == nil {
		return ""
	}
	ro := s.DGD.RolloutOrDefault()
	for _, w := range s.Workloads {
		if !dynamoGrove(w) {
			continue
		}
		if ro.Strategy == v1alpha1.RecreateStrategy {
			return fmt.Sprintf("spec.rollout.strategy Recreate would take Dynamo's %s %s to zero before ours starts, inside the PodCliqueSet %s that also runs Dynamo's frontend: use RollingUpdate for the take-over", w.Kind, w.Name, w.Group.Name)
		}
		svc := s.DGD.Spec.Services[w.Service]
		if svc == nil {
			continue // a component the spec dropped: it waits at its floor, ours does not grow beside it
		}
		surge, _ := planner.ResolveBudgets(planner.ServiceSpec{Replicas: svc.DesiredReplicas(),
			MaxSurge:       *toIntOrPercent(override(svc, v1alpha1.AnnotationMaxSurge, ro.MaxSurge)),
			MaxUnavailable: *toIntOrPercent(override(svc, v1alpha1.AnnotationMaxUnavailable, ro.MaxUnavailable))})
		if f := s.Dynamo.Floors[w.Name]; surge < f {
			return fmt.Sprintf("service %s: maxSurge resolves to %d, below the minAvailable %d of Dynamo's %s %s, which Grove does not let go lower without terminating its whole PodCliqueSet (frontend included): set maxSurge to at least %d for the take-over",
				w.Service, surge, f, w.Kind, w.Name, f)
		}
	}
	return ""
}
