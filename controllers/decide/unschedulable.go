package decide

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// UnschedulableAfter is how long a DGD with replicas not ready goes without progress
// before a pass looks for its pods the scheduler could not place. The operator watches
// pods as metadata only (their conditions are not in its cache), so it looks only when
// a wait has lasted: a healthy step never costs the list.
const UnschedulableAfter = 15 * time.Second

// unschedulable says, per service, why its pods the scheduler could not place wait
// ("2 decode pods of revision 3 unschedulable: 0/4 nodes are available: 4
// Insufficient nvidia.com/gpu"), once the DGD has waited UnschedulableAfter with
// replicas not ready and nothing moved this pass; before that it asks for a pass then,
// and once due it asks for the list (Needs.Unscheduled). Nil when it did not look.
func unschedulable(v *view, h *history, res []Workload, d *draft) map[string]string {
	if !v.CanListUnscheduled || len(d.progress) > 0 {
		return nil
	}
	short := false
	for _, w := range res {
		short = short || !w.Terminating && w.Ready < w.Replicas
	}
	if !short {
		return nil
	}
	since := v.dgd.CreationTimestamp.Time
	if ru := v.dgd.Status.RollingUpdate; ru != nil && ru.LastProgressTime != nil {
		since = ru.LastProgressTime.Time
	}
	if wait := since.Add(UnschedulableAfter).Sub(v.Now); wait > 0 {
		d.requeueIn(wait + 100*time.Millisecond)
		return nil
	}
	if !v.UnscheduledListed {
		v.needs.Unscheduled = true
		return nil
	}
	return unschedulableMessages(v, h, d)
}

// unschedulableMessages groups the DGD's unscheduled pods by service and revision.
func unschedulableMessages(v *view, h *history, d *draft) map[string]string {
	type group struct {
		service string
		rev     int64
	}
	count, why := map[group]int{}, map[group]string{}
	for _, pod := range v.Unscheduled {
		if pod.Graph != v.dgd.Name {
			continue
		}
		g := group{pod.Service, h.number(pod.Hash)}
		count[g]++
		why[g] = schedulerReason(pod.Message)
	}
	groups := make([]group, 0, len(count))
	for g := range count {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool {
		return groups[i].service < groups[j].service || groups[i].service == groups[j].service && groups[i].rev > groups[j].rev
	})
	out := map[string]string{}
	for _, g := range groups {
		pods := "pods"
		if count[g] == 1 {
			pods = "pod"
		}
		of := ""
		if g.rev > 0 {
			of = fmt.Sprintf(" of revision %d", g.rev)
		}
		msg := fmt.Sprintf("%d %s %s%s unschedulable: %s", count[g], g.service, pods, of, why[g])
		if prev := out[g.service]; prev != "" {
			msg = prev + "; " + msg
		}
		out[g.service] = msg
	}
	if len(groups) > 0 {
		// Look again while they wait: a node may come, or the reason change.
		d.requeueIn(UnschedulableAfter)
	}
	return out
}

// schedulerReason keeps the scheduler's first sentence, its verdict on the nodes, and
// drops what follows (post-filter and preemption detail): "0/4 nodes are available: 4
// Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/4 nodes are
// available: ..." (kube-scheduler 1.36) becomes "0/4 nodes are available: 4
// Insufficient nvidia.com/gpu". Names inside it (taint keys, resources) hold no ". ".
func schedulerReason(msg string) string {
	msg = strings.TrimSpace(msg)
	if i := strings.Index(msg, ". "); i > 0 {
		msg = msg[:i]
	}
	if i := strings.Index(msg, " preemption:"); i > 0 {
		msg = msg[:i]
	}
	return strings.TrimSuffix(strings.TrimSpace(msg), ".")
}
