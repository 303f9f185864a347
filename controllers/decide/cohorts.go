package decide

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/revisions"
)

// Cohorts (spec.rollout.frontends; TRAFFIC.md). A cohort is one worker revision's
// frontends plus its workers: its frontend `{dgd}-{frontend}-{hash}` discovers exactly
// its revision's Dynamo namespace (render.Component.Cohort), so no request is served
// across versions, and client traffic is split between the cohorts by weight
// (traffic.go). In cohort form the planner moves each cohort's frontend replicas with
// its workers, under the same budgets and ratio (a frontend service is one more service
// of the pool); a cohort's frontend is a revision workload like a worker's, whose
// template the goal revision updates in place when only a frontend changes.
//
// A DGD is in one of two forms, its frontends shared (one `{dgd}-{frontend}` per
// frontend service, discovering every revision by prefix) or per cohort, and moves from
// one to the other only while it has one worker revision: a shared frontend sees every
// revision, so it may never run beside a second cohort. Into cohort form (the prelude):
// the live revision's cohort frontend is made at full size, the shared frontend goes
// once it has the availability a stable replacement needs (replacedBy), and the workers
// hold until its pods are gone. Back to shared form (the postlude): the shared frontend
// is made, the frontend's Service selects frontend pods again once it is ready, and the
// cohort frontends and the traffic provider's objects go once it does.

// form is how the DGD's frontends serve its worker revisions this pass.
type form struct {
	// cohorts: every worker revision has its own frontends (cohort form).
	cohorts bool
	// frontends are the frontend services (componentType frontend) of the spec.
	frontends []string
	// prelude: cohort form while a shared frontend still runs; preludeHash is the
	// revision whose cohort frontends replace it.
	prelude     bool
	preludeHash string
	// postlude: shared form while cohort frontends still run.
	postlude bool
	// deferred says why the form spec.rollout.frontends asks for is not taken yet.
	deferred string
}

// isFrontend reports whether service is one of the spec's frontend services.
func (f form) isFrontend(service string) bool {
	for _, n := range f.frontends {
		if n == service {
			return true
		}
	}
	return false
}

// frontendsOf lists the frontend services of dgd, sorted.
func frontendsOf(dgd *v1alpha1.DynamoGraphDeployment) []string {
	var out []string
	for _, name := range dgd.ServiceNames() {
		if dgd.Spec.Services[name].ComponentType == v1alpha1.ComponentTypeFrontend {
			out = append(out, name)
		}
	}
	return out
}

// resolveForm decides the form of this pass from spec.rollout.frontends and what runs:
// Shared never has cohorts, PerRevision always; Auto has them once cohort frontends
// run, or when the rollout to the update revision changes a frontend's template
// together with the workers. A change of form waits until one worker revision is left.
func resolveForm(v *view, h *history) form {
	f := form{frontends: frontendsOf(v.dgd)}
	if len(f.frontends) == 0 {
		return f
	}
	cohortLive, sharedLive := false, false
	for _, w := range v.Workloads {
		if !f.isFrontend(w.Service) || (w.Terminating && w.Pods == 0) {
			continue
		}
		if w.Hash != "" {
			cohortLive = cohortLive || !w.Terminating
		} else {
			sharedLive = true
		}
	}
	var wanted bool
	switch v.dgd.RolloutOrDefault().Frontends {
	case v1alpha1.FrontendsShared:
		wanted = false
	case v1alpha1.FrontendsPerRevision:
		wanted = true
	default:
		wanted = cohortLive || frontendChangesWithWorkers(v, h, f.frontends)
	}
	live := liveRevisions(v, f)
	switchable := len(live) <= 1
	switch {
	case wanted && sharedLive && !switchable:
		f.deferred = fmt.Sprintf("cohorts start once one worker revision is left: %d run now behind the shared frontend", len(live))
		f.cohorts = cohortLive // a half-made prelude goes on
	case !wanted && cohortLive && !switchable:
		f.cohorts = true
		f.deferred = fmt.Sprintf("the shared frontend returns once one worker revision is left: %d cohorts run now", len(live))
	default:
		f.cohorts = wanted
	}
	f.prelude = f.cohorts && sharedLive
	f.postlude = !f.cohorts && cohortLive
	if f.prelude {
		f.preludeHash = h.update.WorkerHash
		if len(live) == 1 {
			f.preludeHash = live[0]
		}
	}
	return f
}

// liveRevisions are the worker hashes whose worker workloads are live (not being
// deleted), sorted.
func liveRevisions(v *view, f form) []string {
	seen := map[string]bool{}
	for _, w := range v.Workloads {
		if w.Hash != "" && !w.Terminating && !f.isFrontend(w.Service) {
			seen[w.Hash] = true
		}
	}
	out := make([]string, 0, len(seen))
	for h := range seen {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// frontendChangesWithWorkers reports whether the rollout to the update revision changes
// the workers (against the revision every worker was on before it) and a frontend's
// template (replicas aside) against the revision before the update: Auto's condition
// for cohorts. A shared frontend is updated in place as soon as the spec changes it,
// so the revision before the update is the one whose frontend runs: a frontend changed
// first and the workers later is no Dynamo upgrade. A revision recorded before
// revisions held every service says nothing: no cohort.
func frontendChangesWithWorkers(v *view, h *history, frontends []string) bool {
	old := &v.dgd.Status
	if h.current.IsZero() || h.current.WorkerHash == h.update.WorkerHash ||
		(h.sameRollout(old) && old.RollingUpdate.Abort != nil) { // an aborted rollout starts nothing
		return false
	}
	prev := h.before(h.update.Number)
	if prev == nil {
		return false
	}
	was, err := revisions.DecodeRevisionData(prev)
	if err != nil {
		return false
	}
	for _, name := range frontends {
		before, now := was.Services[name], v.dgd.Spec.Services[name]
		if before == nil || now == nil {
			continue
		}
		if !sameTemplate(before, now) {
			return true
		}
	}
	return false
}

// sameTemplate reports whether two specs of a service run the same frontend: equal but
// for their replicas and a restart's annotation (spec.restart.id restarts the same
// version: no cohort is needed for it).
func sameTemplate(a, b *v1alpha1.DynamoComponentDeploymentSharedSpec) bool {
	x, y := a.DeepCopy(), b.DeepCopy()
	x.Replicas, y.Replicas = nil, nil
	for _, s := range []*v1alpha1.DynamoComponentDeploymentSharedSpec{x, y} {
		delete(s.Annotations, v1alpha1.AnnotationRestartAt)
		if len(s.Annotations) == 0 {
			s.Annotations = nil
		}
	}
	return equality.Semantic.DeepEqual(x, y)
}

// rolled reports whether w is moved by the planner: a worker revision's workload, or,
// in cohort form, a cohort's frontend.
func (v *view) rolled(w backends.Workload) bool {
	return w.Hash != "" && (v.form.cohorts || !v.form.isFrontend(w.Service))
}

// cohortFrontends are the observed cohort frontend workloads (a frontend service's
// workloads with a hash), live or being deleted.
func (v *view) cohortFrontends() []Workload {
	var out []Workload
	for _, w := range v.Workloads {
		if w.Hash != "" && v.form.isFrontend(w.Service) {
			out = append(out, w)
		}
	}
	return out
}

// rolledServices are the services the planner moves: the goal's worker services and,
// in cohort form, its frontend services.
func (c course) rolledServices(v *view) []string {
	out := c.goalDGD.WorkerServiceNames()
	if v.form.cohorts {
		for _, name := range v.form.frontends {
			if c.goalDGD.Spec.Services[name] != nil {
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// prelude decides, in cohort form while a shared frontend runs, the cohort frontends of
// the live revision at full size (the spec's replicas, that revision's template), and
// returns why the workers hold ("" once no shared frontend is left, pods included) and
// the workloads it creates (the status counts them).
func prelude(v *view, h *history, d *draft) (string, []Workload) {
	if !v.form.prelude {
		return "", nil
	}
	var created []Workload
	hash := v.form.preludeHash
	pools := map[string]*backends.Pool{}
	var order []string
	for _, name := range v.form.frontends {
		key := backends.Key{Service: name, Hash: hash}
		b := v.backendOf[name].Kind
		if v.observedKey(key) {
			continue
		}
		spec := h.templateOf(v.dgd, name, hash)
		if spec == nil {
			spec = v.dgd.Spec.Services[name]
		}
		if pools[b] == nil {
			pools[b] = &backends.Pool{Hash: hash}
			order = append(order, b)
		}
		pools[b].Services = append(pools[b].Services, backends.ServiceWorkload{Key: key, Spec: spec, Replicas: v.dgd.Spec.Services[name].DesiredReplicas(), InPlace: true})
	}
	for _, b := range order {
		w := Write{Op: Ensure, Backend: b, Pool: *pools[b], From: v.dgd, Expect: map[string]int32{}, Progress: true}
		for _, sw := range pools[b].Services {
			name := v.name(b, sw.Key)
			w.Expect[name] = sw.Replicas
			w.Say = append(w.Say, fmt.Sprintf("created %s at %d for revision %d's cohort", name, sw.Replicas, h.number(hash)))
			created = append(created, Workload{Backend: b, Workload: backends.Workload{Key: sw.Key, Kind: b, Name: name, Replicas: sw.Replicas}})
		}
		d.write(w)
	}
	return fmt.Sprintf("revision %d's frontends are made its own (a cohort) before any other revision starts: waiting for the shared frontend to go", h.number(hash)), created
}

// observedKey reports whether a live workload of key was observed.
func (s *Snapshot) observedKey(key backends.Key) bool {
	for _, w := range s.Workloads {
		if w.Key == key && !w.Terminating {
			return true
		}
	}
	return false
}

// cohortReplaces reports whether the shared frontend workloads of service may go in
// the prelude: the live revision's cohort frontend has at least R - ⌊R/4⌋ ready
// replicas (replacedBy's floor), or the shared ones have none ready.
func cohortReplaces(v *view, service string, r int32) (bool, string) {
	var ready, old int32
	for _, w := range v.Workloads {
		if w.Service != service || w.Terminating {
			continue
		}
		switch w.Hash {
		case "":
			old += min(w.Ready, w.Replicas)
		case v.form.preludeHash:
			ready += min(w.Ready, w.Replicas)
		}
	}
	switch floor := r - r/4; {
	case ready >= floor:
		return true, fmt.Sprintf("%s has %d/%d ready in revision %s's cohort", service, ready, r, v.form.preludeHash)
	case old == 0:
		return true, fmt.Sprintf("%s had none ready on its shared frontend", service)
	}
	return false, ""
}
