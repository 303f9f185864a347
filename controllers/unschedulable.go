package controllers

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/decide"
)

// unscheduledTTL is how long a namespace's list of unscheduled pods serves the DGDs of
// that namespace before a pass that needs it lists again.
const unscheduledTTL = 5 * time.Second

// unscheduledPods lists, per namespace, the DGD pods the scheduler could not place, at
// most once per unscheduledTTL, and shares the answer among that namespace's DGDs (a
// decision asks for them once a DGD has waited decide.UnschedulableAfter). A
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
	pods []decide.UnscheduledPod
}

// list returns namespace ns's unscheduled DGD pods as listed at most unscheduledTTL
// before now.
func (u *unscheduledPods) list(ctx context.Context, r client.Reader, ns string, now time.Time) ([]decide.UnscheduledPod, error) {
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
	var out []decide.UnscheduledPod
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				out = append(out, decide.UnscheduledPod{Graph: pod.Labels[v1alpha1.LabelGraph], Service: pod.Labels[v1alpha1.LabelService],
					Hash: pod.Labels[v1alpha1.LabelWorkerHash], Message: c.Message})
			}
		}
	}
	l.at, l.pods = now, out
	return out, nil
}
