package decide

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/planner"
)

// input builds the planner's input from the spec, the course and a set of worker
// workloads (the observed ones, or those a pass leaves).
func (c course) input(v *view, workloads []Workload) planner.Input {
	ro := v.dgd.RolloutOrDefault()
	in := planner.Input{
		Spec: planner.Spec{
			Strategy:  planner.Strategy(ro.Strategy),
			Paused:    ro.Paused,
			Partition: toIntOrPercent(ro.Partition),
		},
		UpdateRevision: c.h.number(c.h.goalHash()),
	}
	switch {
	case c.aborted: // back to the stable revision: no partition or step holds it
		in.Spec.Partition = nil
	case c.hold != nil: // spec.rollout.steps: the step's hold (the spec's partition is unset)
		in.Spec.Partition, in.Spec.Paused = c.hold.Partition, ro.Paused || c.hold.Paused
	}
	in.Spec.Services = c.services(v, ro, workloads)
	for _, w := range workloads {
		if !v.rolled(w.Workload) || v.form.isFrontend(w.Service) {
			continue // a cohort's frontend follows the workers (followers)
		}
		in.Workloads = append(in.Workloads, planner.Workload{
			Service:  w.Service,
			Revision: c.h.number(w.Hash),
			Spec:     w.Replicas,
			Current:  max(w.Current, w.Pods),
			Ready:    min(w.Ready, w.Replicas),
		})
	}
	return in
}

// services are the planner's worker services: those of the goal's spec, then those of
// worker workloads whose service the spec no longer has (it drains with its pool).
func (c course) services(v *view, ro v1alpha1.RolloutSpec, workloads []Workload) []planner.ServiceSpec {
	var out []planner.ServiceSpec
	seen := map[string]bool{}
	for _, name := range c.goalDGD.WorkerServiceNames() {
		svc := c.goalDGD.Spec.Services[name]
		out = append(out, planner.ServiceSpec{
			Name:           name,
			Role:           svc.Role(),
			Replicas:       svc.DesiredReplicas(),
			MaxSurge:       *toIntOrPercent(override(svc, v1alpha1.AnnotationMaxSurge, ro.MaxSurge)),
			MaxUnavailable: *toIntOrPercent(override(svc, v1alpha1.AnnotationMaxUnavailable, ro.MaxUnavailable)),
			UnreadyFirst:   v.backendOf[name].RemovesUnreadyFirst,
		})
		seen[name] = true
	}
	for _, w := range workloads {
		if !v.rolled(w.Workload) || v.form.isFrontend(w.Service) || seen[w.Service] {
			continue
		}
		seen[w.Service] = true
		out = append(out, planner.ServiceSpec{
			Name: w.Service, Role: v1alpha1.ComponentTypeWorker,
			MaxSurge: *toIntOrPercent(ro.MaxSurge), MaxUnavailable: *toIntOrPercent(ro.MaxUnavailable),
			UnreadyFirst: v.backendOfWorkload(w).RemovesUnreadyFirst,
		})
	}
	return out
}

// roleFrontend orders a cohort's frontend among the roles of a pool's writes (byRole).
const roleFrontend = "frontend"

// followers are, in cohort form, the frontend services as the planner's followers
// (planner.Follow): each cohort's frontends follow its workers, under the frontend's
// budgets (spec.rollout's, or its annotations).
func (c course) followers(v *view, workloads []Workload) []planner.Follower {
	if !v.form.cohorts {
		return nil
	}
	ro := v.dgd.RolloutOrDefault()
	var out []planner.Follower
	for _, name := range v.form.frontends {
		svc := c.goalDGD.Spec.Services[name]
		if svc == nil {
			continue
		}
		f := planner.Follower{Spec: planner.ServiceSpec{Name: name, Role: roleFrontend, Replicas: svc.DesiredReplicas(),
			MaxSurge:       *toIntOrPercent(override(svc, v1alpha1.AnnotationMaxSurge, ro.MaxSurge)),
			MaxUnavailable: *toIntOrPercent(override(svc, v1alpha1.AnnotationMaxUnavailable, ro.MaxUnavailable)),
			UnreadyFirst:   v.backendOf[name].RemovesUnreadyFirst}}
		for _, w := range workloads {
			// An outdated one (a side-by-side replacement runs beside it) is not the
			// planner's: it keeps its replicas until it goes (view.targetOf).
			if w.Service == name && w.Hash != "" && !w.Outdated {
				f.Workloads = append(f.Workloads, planner.Workload{Service: name, Revision: c.h.number(w.Hash), Spec: w.Replicas,
					Current: max(w.Current, w.Pods), Ready: min(w.Ready, w.Replicas)})
			}
		}
		out = append(out, f)
	}
	return out
}

// override returns a service's rolling-update annotation when set, else def.
func override(svc *v1alpha1.DynamoComponentDeploymentSharedSpec, annotation string, def *intstr.IntOrString) *intstr.IntOrString {
	if v, ok := svc.Annotations[annotation]; ok && v != "" {
		parsed := intstr.Parse(v)
		return &parsed
	}
	return def
}

func toIntOrPercent(v *intstr.IntOrString) *planner.IntOrPercent {
	if v == nil {
		return nil
	}
	if v.Type == intstr.Int {
		return &planner.IntOrPercent{Value: v.IntVal}
	}
	var n int32
	_, _ = fmt.Sscanf(v.StrVal, "%d%%", &n)
	return &planner.IntOrPercent{Value: n, Percent: true}
}
