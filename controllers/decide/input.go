package decide

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/planner"
	"github.com/dgd-rollout/operator/controllers/steps"
)

// course is where the workers are headed this pass: the revision they move to (goal,
// in h), the DGD their services render from, whether the rollout is aborted, and the
// hold of spec.rollout.steps (nil without steps). The planner's input is built from it.
type course struct {
	h       *history
	goalDGD *v1alpha1.DynamoGraphDeployment
	aborted bool
	hold    *steps.Output
}

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
	seen := map[string]bool{}
	for _, name := range c.goalDGD.WorkerServiceNames() {
		svc := c.goalDGD.Spec.Services[name]
		in.Spec.Services = append(in.Spec.Services, planner.ServiceSpec{
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
		if w.Hash == "" {
			continue
		}
		if !seen[w.Service] { // a worker service removed from the spec drains with its pool
			seen[w.Service] = true
			in.Spec.Services = append(in.Spec.Services, planner.ServiceSpec{
				Name: w.Service, Role: v1alpha1.ComponentTypeWorker,
				MaxSurge: *toIntOrPercent(ro.MaxSurge), MaxUnavailable: *toIntOrPercent(ro.MaxUnavailable),
				UnreadyFirst: v.backend(w.Backend).RemovesUnreadyFirst,
			})
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
