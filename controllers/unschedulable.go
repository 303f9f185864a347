package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// unschedulableAfter is how long a DGD with replicas not ready goes without progress
// before a pass asks the API server for its pods the scheduler could not place. The
// operator watches pods as metadata only (their conditions are not in its cache), so
// it looks only when a wait has lasted: a healthy step never costs the list.
const unschedulableAfter = 15 * time.Second

// findUnschedulable fills p.unschedulable (service -> "2 decode pods of revision 3
// unschedulable: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu") from the
// PodScheduled condition of the DGD's pods that have no node, once the DGD has waited
// unschedulableAfter with replicas not ready; before that it asks for a pass then.
func (p *pass) findUnschedulable(ctx context.Context) error {
	if p.r.APIReader == nil || p.waitingForCache || p.invalid != nil || len(p.wrote) > 0 {
		return nil
	}
	short := false
	for _, w := range p.result {
		short = short || !w.Terminating && w.Ready < w.Replicas
	}
	if !short {
		return nil
	}
	since := p.dgd.CreationTimestamp.Time
	if ru := p.old.RollingUpdate; ru != nil && ru.LastProgressTime != nil {
		since = ru.LastProgressTime.Time
	}
	if wait := since.Add(unschedulableAfter).Sub(p.now); wait > 0 {
		p.requeueIn(wait + 100*time.Millisecond)
		return nil
	}
	var pods corev1.PodList
	if err := p.r.APIReader.List(ctx, &pods, client.InNamespace(p.dgd.Namespace),
		client.MatchingLabels{v1alpha1.LabelGraph: p.dgd.Name}, client.MatchingFields{"spec.nodeName": ""}); err != nil {
		return fmt.Errorf("listing unscheduled pods of %s/%s: %w", p.dgd.Namespace, p.dgd.Name, err)
	}
	type group struct {
		service string
		rev     int64
	}
	count, why := map[group]int{}, map[group]string{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				g := group{pod.Labels[v1alpha1.LabelService], p.revisionOf(pod.Labels[v1alpha1.LabelWorkerHash])}
				count[g]++
				why[g] = schedulerReason(c.Message)
			}
		}
	}
	groups := make([]group, 0, len(count))
	for g := range count {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool {
		return groups[i].service < groups[j].service || groups[i].service == groups[j].service && groups[i].rev > groups[j].rev
	})
	p.unschedulable = map[string]string{}
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
		if prev := p.unschedulable[g.service]; prev != "" {
			msg = prev + "; " + msg
		}
		p.unschedulable[g.service] = msg
	}
	if len(groups) > 0 {
		// Look again while they wait: a node may come, or the reason change.
		p.requeueIn(unschedulableAfter)
	}
	return nil
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
