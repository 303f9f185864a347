package decide

import (
	"fmt"

	"github.com/dgd-rollout/operator/backends"
)

// ensureStable decides the writes of every non-worker service (frontend, planner, anything
// else): each backend's pool of them ensured (created, or updated in place), and the
// stable workloads of services that are gone deleted. On a StableSideBySide backend a
// new template is a new workload beside the old one; the old one goes once the new one
// has the availability a Deployment's default rolling update keeps (replacedBy).
func ensureStable(v *view, d *draft) {
	pools := map[string]*backends.Pool{}
	says := map[string][]string{}
	var order []string
	for _, name := range v.dgd.ServiceNames() {
		svc := v.dgd.Spec.Services[name]
		if svc.IsWorker() || (v.form.cohorts && v.form.isFrontend(name)) {
			continue // in cohort form a frontend runs per revision (cohorts.go)
		}
		b := v.backendOf[name].Kind
		key := backends.Key{Service: name}
		wname := v.name(b, key)
		if held := v.dynamoHolds(wname); held != nil {
			orphanDynamo(v, d, held) // ours is made once the name is free
			continue
		}
		if pools[b] == nil {
			pools[b] = &backends.Pool{}
			order = append(order, b)
		}
		pools[b].Services = append(pools[b].Services, backends.ServiceWorkload{Key: key, Spec: svc, Replicas: svc.DesiredReplicas()})
		if !v.observedNamed(wname) {
			says[b] = append(says[b], fmt.Sprintf("created %s for %s", wname, name))
		}
	}
	for _, b := range order {
		d.write(Write{Op: Ensure, Backend: b, Pool: *pools[b], From: v.dgd, Say: says[b], Progress: true})
	}
	retireStable(v, d)
	retireCohortFronts(v, d)
}

// retireCohortFronts deletes, in shared form (the postlude of cohorts), the cohorts'
// frontends once the shared frontend of their service has the availability a stable
// replacement needs (replacedBy) and the service's Service selects frontend pods again
// (as cached): no client is sent to the traffic provider that routes to them any more.
func retireCohortFronts(v *view, d *draft) {
	if v.form.cohorts {
		return
	}
	for _, w := range v.cohortFrontends() {
		svc := v.dgd.Spec.Services[w.Service]
		if w.Terminating || svc == nil || !entryDirect(v, w.Service) {
			continue
		}
		if ok, why := replacedBy(v, w.Service, svc.DesiredReplicas()); ok {
			deleteWorkload(v, d, w, why+"; the shared frontend serves again")
		}
	}
}

// retireStable deletes stable workloads whose service is gone (or is a worker now, or
// moved backend) and outdated ones whose replacement is ready, and outdated cohort
// frontends (a StableSideBySide backend replaces them as it replaces a stable
// service's template: backends/grove) once their replacement is (cohortFrontReplaced).
// A workload in a group goes only with its whole group, once every workload in it may
// go.
func retireStable(v *view, d *draft) {
	mayGo := map[string]bool{} // group (or workload) name -> every member may go
	why := map[string]string{}
	var order []Workload
	for _, w := range v.Workloads {
		cohort := w.Hash != "" && w.Outdated && v.form.isFrontend(w.Service)
		if w.Hash != "" && !cohort || w.Terminating {
			continue
		}
		id := groupOf(w.Workload)
		ok, reason := stableMayGo(v, w)
		if cohort {
			ok, reason = cohortFrontReplaced(v, w.Key)
		}
		if _, seen := mayGo[id]; !seen {
			mayGo[id] = true
			order = append(order, w)
		}
		mayGo[id] = mayGo[id] && ok
		if ok && why[id] == "" {
			why[id] = reason
		}
	}
	for _, w := range order {
		if id := groupOf(w.Workload); mayGo[id] {
			deleteWorkload(v, d, w, why[id])
		}
	}
}

// stableMayGo reports whether a stable workload may be deleted, and why.
func stableMayGo(v *view, w Workload) (bool, string) {
	svc := v.dgd.Spec.Services[w.Service]
	switch {
	case svc == nil:
		return true, fmt.Sprintf("service %s is gone", w.Service)
	case svc.IsWorker():
		return true, fmt.Sprintf("service %s is a worker now", w.Service)
	case v.backendOf[w.Service].Kind != w.Backend:
		return true, fmt.Sprintf("service %s moved to %s", w.Service, v.backendOf[w.Service].Kind)
	case v.form.cohorts && v.form.isFrontend(w.Service):
		if v.form.unservable != "" {
			return false, "" // the cohorts cannot be served: the shared frontend keeps serving
		}
		return cohortReplaces(v, w.Service, svc.DesiredReplicas())
	case !w.Outdated:
		return false, ""
	}
	return replacedBy(v, w.Service, svc.DesiredReplicas())
}

// replacedBy reports whether a stable service's outdated workloads may go: its current
// workload has at least R - ⌊R/4⌋ ready replicas (a Deployment's default maxUnavailable
// of 25%, so a one-replica frontend never has none), or the outdated ones have none
// ready (deleting them loses nothing).
func replacedBy(v *view, service string, r int32) (bool, string) {
	var ready, old int32
	for _, w := range v.Workloads {
		if w.Service != service || w.Hash != "" || w.Terminating {
			continue
		}
		if w.Outdated {
			old += min(w.Ready, w.Replicas)
		} else {
			ready += min(w.Ready, w.Replicas)
		}
	}
	floor := r - r/4
	switch {
	case ready >= floor:
		return true, fmt.Sprintf("%s has %d/%d ready on its new template", service, ready, r)
	case old == 0:
		return true, fmt.Sprintf("%s had none ready on its old template", service)
	}
	return false, ""
}

// cohortFrontReplaced reports whether the outdated workloads of a cohort's frontend key
// may go, replacedBy's rule for its replacement, the key's current workloads: they have
// at least R - ⌊R/4⌋ ready, R their replicas (what the planner gives the key now:
// a cohort's frontends follow its share of the workers), or the outdated ones have none
// ready. R = 2: the old template goes once both new frontends are ready.
func cohortFrontReplaced(v *view, key backends.Key) (bool, string) {
	var r, ready, old int32
	for _, w := range v.Workloads {
		switch {
		case w.Key != key || w.Terminating:
		case w.Outdated:
			old += min(w.Ready, w.Replicas)
		default:
			r += w.Replicas
			ready += min(w.Ready, w.Replicas)
		}
	}
	switch floor := r - r/4; {
	case r > 0 && ready >= floor:
		return true, fmt.Sprintf("%s has %d/%d ready on its new template in revision %s's cohort", key.Service, ready, r, key.Hash)
	case old == 0:
		return true, fmt.Sprintf("%s had none ready on its old template in revision %s's cohort", key.Service, key.Hash)
	}
	return false, ""
}

// deleteWorkload decides the deletion of the object holding w (its group, once) and
// says why in the step's Event.
func deleteWorkload(v *view, d *draft, w Workload, why string) {
	id := groupOf(w.Workload)
	if d.deleted[id] {
		return
	}
	d.deleted[id] = true
	var forget []string
	for _, o := range v.Workloads {
		if groupOf(o.Workload) == id {
			forget = append(forget, o.Name)
		}
	}
	d.write(Write{Op: DeleteWorkload, Backend: w.Backend, Workload: w.Workload, Forget: forget,
		Say: []string{fmt.Sprintf("deleted %s (%s)", id, why)}, Progress: true})
}

// relabel puts back the labels someone stripped from the DGD's workloads (each object
// once: a group's workloads share it), which users and kubectl dgd select them by.
func relabel(v *view, d *draft) {
	done := map[string]bool{}
	for _, w := range v.Workloads {
		if id := groupOf(w.Workload); len(w.Relabel) > 0 && !done[id] {
			done[id] = true
			d.write(Write{Op: Relabel, Backend: w.Backend, Workload: w.Workload})
		}
	}
}
