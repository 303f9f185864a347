package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// unschedulableAfter is how long a DGD with replicas not ready goes without progress
// before a pass looks for its pods the scheduler could not place. The operator watches
// pods as metadata only (their conditions are not in its cache), so it looks only when
// a wait has lasted: a healthy step never costs the list (unscheduledPods).
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
	pods, err := p.r.unscheduled.list(ctx, p.r.APIReader, p.dgd.Namespace, p.now)
	if err != nil {
		return fmt.Errorf("listing unscheduled pods of %s/%s: %w", p.dgd.Namespace, p.dgd.Name, err)
	}
	type group struct {
		service string
		rev     int64
	}
	count, why := map[group]int{}, map[group]string{}
	for _, pod := range pods {
		if pod.graph != p.dgd.Name {
			continue
		}
		g := group{pod.service, p.revisionOf(pod.hash)}
		count[g]++
		why[g] = schedulerReason(pod.message)
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

// unscheduledTTL is how long a namespace's list of unscheduled pods serves the DGDs of
// that namespace before a pass that needs it lists again.
const unscheduledTTL = 5 * time.Second

// unscheduledPods lists, per namespace, the DGD pods the scheduler could not place, at
// most once per unscheduledTTL, and shares the answer among that namespace's DGDs. A
// list per DGD pass cost the API server one consistent list of the namespace's pods
// for every pass of every DGD that had waited unschedulableAfter: benchmark P3 made
// 3,351 of them at 500 graphs (slow steps under load are waits like any other), none
// of which found a pod. Lists are served from the API server's watch cache
// (resourceVersion 0): a report of where the scheduler stands needs no quorum read.
type unscheduledPods struct {
	mu   sync.Mutex
	byNS map[string]*unscheduledList
}

// unscheduledList is one namespace's last list; mu makes the DGDs of a namespace that
// need it at once wait for one list.
type unscheduledList struct {
	mu   sync.Mutex
	at   time.Time
	pods []unscheduledPod
}

// unscheduledPod is a pod of a DGD that the scheduler reported it could not place.
type unscheduledPod struct {
	graph, service, hash string
	message              string // the PodScheduled condition's message
}

// list returns namespace ns's unscheduled DGD pods as listed at most unscheduledTTL
// before now.
func (u *unscheduledPods) list(ctx context.Context, r client.Reader, ns string, now time.Time) ([]unscheduledPod, error) {
	u.mu.Lock()
	if u.byNS == nil {
		u.byNS = map[string]*unscheduledList{}
	}
	l := u.byNS[ns]
	if l == nil {
		// Forget namespaces no pass has asked about for a while (deleted ones).
		for k, v := range u.byNS {
			if v.mu.TryLock() {
				if now.Sub(v.at) > 12*unscheduledTTL {
					delete(u.byNS, k)
				}
				v.mu.Unlock()
			}
		}
		l = &unscheduledList{}
		u.byNS[ns] = l
	}
	u.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.at.IsZero() && now.Sub(l.at) < unscheduledTTL && !now.Before(l.at) {
		return l.pods, nil
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{v1alpha1.LabelGraph},
		client.MatchingFields{"spec.nodeName": ""}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}); err != nil {
		return nil, err
	}
	var out []unscheduledPod
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				out = append(out, unscheduledPod{graph: pod.Labels[v1alpha1.LabelGraph], service: pod.Labels[v1alpha1.LabelService],
					hash: pod.Labels[v1alpha1.LabelWorkerHash], message: c.Message})
			}
		}
	}
	l.at, l.pods = now, out
	return out, nil
}
