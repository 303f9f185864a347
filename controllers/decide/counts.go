package decide

import (
	"fmt"
	"sort"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
)

// counts sets the per-service and total replica counts of st from the workloads as the
// pass leaves them (res), and each service's message (why it is short, when known).
func counts(v *view, h *history, res []Workload, unsched map[string]string, st *v1alpha1.DynamoGraphDeploymentStatus, d *draft) {
	old := &v.dgd.Status
	services := map[string]v1alpha1.ServiceStatus{}
	var ready, desired int32
	st.Replicas, st.ReadyReplicas, st.UpdatedReplicas, st.AvailableReplicas, st.UpdatedReadyReplicas = 0, 0, 0, 0, 0
	for _, name := range v.dgd.ServiceNames() {
		svc := v.dgd.Spec.Services[name]
		ss := serviceCounts(v, h, res, name, st)
		switch {
		case unsched != nil: // looked this pass
			ss.Message = unsched[name]
		case ss.ReadyReplicas < svc.DesiredReplicas() && len(d.progress) == 0:
			ss.Message = old.Services[name].Message // still short, nothing moved: what was found holds
		}
		if ss.Message != "" && ss.Message != old.Services[name].Message {
			d.event("Warning", v1alpha1.EventPodsUnschedulable, ss.Message)
		}
		services[name] = ss
		ready += ss.ReadyReplicas
		desired += svc.DesiredReplicas()
		if svc.IsWorker() {
			st.Replicas += ss.Replicas
			st.ReadyReplicas += ss.ReadyReplicas
			st.UpdatedReplicas += ss.UpdatedReplicas
			st.AvailableReplicas += ss.AvailableReplicas
		}
	}
	st.Services = services
	st.Ready = fmt.Sprintf("%d/%d", ready, desired)
}

// serviceCounts counts one service's workloads, newest revision first, and adds its
// ready replicas on the update revision to st.UpdatedReadyReplicas.
func serviceCounts(v *view, h *history, res []Workload, name string, st *v1alpha1.DynamoGraphDeploymentStatus) v1alpha1.ServiceStatus {
	svc := v.dgd.Spec.Services[name]
	update := h.update.WorkerHash
	ss := v1alpha1.ServiceStatus{ComponentType: svc.ComponentType, WorkloadKind: v.backendOf[name].Kind}
	for _, w := range sortedWorkloadsOf(h, res, name) {
		ss.Replicas += w.Replicas
		ss.ReadyReplicas += w.Ready
		ss.AvailableReplicas += w.Ready
		if w.Hash == update || (w.Hash == "" && !svc.IsWorker()) {
			ss.UpdatedReplicas += updatedOf(w)
		}
		if w.Hash != "" && w.Hash == update {
			st.UpdatedReadyReplicas += w.Ready
		}
		if !w.Terminating {
			ss.Workloads = append(ss.Workloads, v1alpha1.WorkloadStatus{Name: w.Name, Revision: revisionOfWorkload(h, w), Replicas: w.Replicas, ReadyReplicas: w.Ready})
		}
		// A workload being deleted no longer counts, though its pods still terminate:
		// they are out of discovery (not ready in the EndpointSlices), and counting
		// them would cost a status write per service when they are gone, after the
		// rollout has completed.
		if w.Replicas > 0 || (w.Pods > 0 && !w.Terminating) {
			ss.RuntimeNamespaces = appendUnique(ss.RuntimeNamespaces, backends.EffectiveNamespace(v.dgd, w.Hash != "", w.Hash))
		}
	}
	return ss
}

// updatedOf counts a workload's up-to-date replicas: none of an outdated one (a stable
// or cohort frontend template a new one replaces side by side), all of a worker
// revision's (its template never changes), the reported updated count of a stable one.
func updatedOf(w Workload) int32 {
	switch {
	case w.Outdated:
		return 0
	case w.Hash != "":
		return w.Replicas
	}
	return min(w.Updated, w.Replicas)
}

func revisionOfWorkload(h *history, w Workload) int64 {
	if w.Hash == "" {
		return 0
	}
	return h.number(w.Hash)
}

// sortedWorkloadsOf lists a service's workloads of res, newest revision first.
func sortedWorkloadsOf(h *history, res []Workload, service string) []Workload {
	var out []Workload
	for _, w := range res {
		if w.Service == service {
			out = append(out, w)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return h.number(out[i].Hash) > h.number(out[j].Hash) })
	return out
}

// revisionsOf sets the revision fields of st from the history: the update revision, and
// the current one (every worker's before the rollout; the update once it completed; the
// stable revision of an aborted rollout).
func revisionsOf(h *history, aborted, done bool, st *v1alpha1.DynamoGraphDeploymentStatus) {
	st.UpdateRevision = h.update.Name
	st.UpdateWorkerHash = h.update.WorkerHash
	st.UpdateRevisionNumber = h.update.Number
	cc := h.plan.CollisionCount
	st.CollisionCount = &cc
	switch {
	case aborted: // every worker is on, or returns to, the stable revision
		st.CurrentRevision = h.goal.Name
	case done:
		st.CurrentRevision = h.update.Name
	case !h.current.IsZero():
		st.CurrentRevision = h.current.Name
	default:
		st.CurrentRevision = h.update.Name
	}
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
