package e2e

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/cluster"
)

// Helpers shared by the end-to-end suites (test/e2e, test/crash) that judge a DGD from
// its status and pods.

// UpdateHash is the worker hash of the DGD's update revision.
func UpdateHash(d *v1alpha1.DynamoGraphDeployment) string {
	return d.Status.UpdateWorkerHash
}

// RolledOut reports whether the update revision is complete: phase Completed for the
// current generation, and every service's pods existing, ready, not terminating and,
// for workers, on the update revision (the traffic proxy's pods are none of them).
func RolledOut(d *v1alpha1.DynamoGraphDeployment, pods []corev1.Pod) bool {
	ru := d.Status.RollingUpdate
	if ru == nil || ru.Phase != v1alpha1.RolloutCompleted || d.Status.ObservedGeneration != d.Generation {
		return false
	}
	hash := UpdateHash(d)
	want := map[string]int{}
	for _, name := range d.ServiceNames() {
		svc := d.Spec.Services[name]
		want[name] = int(svc.DesiredReplicas() * svc.NodeCount())
	}
	got := map[string]int{}
	for i := range pods {
		p := &pods[i]
		if p.Labels[v1alpha1.LabelTrafficProxy] == "true" {
			continue // the traffic proxy's pod, labelled with its frontend service
		}
		svc := d.Spec.Services[p.Labels[v1alpha1.LabelService]]
		if svc == nil || !p.DeletionTimestamp.IsZero() || !cluster.PodReady(p) {
			return false
		}
		if svc.IsWorker() && p.Labels[v1alpha1.LabelWorkerHash] != hash {
			return false
		}
		got[p.Labels[v1alpha1.LabelService]]++
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// Pool counts the replicas the status records per worker service on one revision number.
func Pool(d *v1alpha1.DynamoGraphDeployment, revision int64) map[string]int32 {
	out := map[string]int32{}
	for _, name := range d.WorkerServiceNames() {
		for _, w := range d.Status.Services[name].Workloads {
			if w.Revision == revision {
				out[name] += w.Replicas
			}
		}
	}
	return out
}

// Summary is a one-line account of a DGD's status for failure messages.
func Summary(d *v1alpha1.DynamoGraphDeployment) string {
	var b strings.Builder
	fmt.Fprintf(&b, "gen=%d observed=%d ", d.Generation, d.Status.ObservedGeneration)
	if ru := d.Status.RollingUpdate; ru != nil {
		fmt.Fprintf(&b, "phase=%s/%s ", ru.Phase, ru.Reason)
	}
	fmt.Fprintf(&b, "update=%s#%d current=%s ", d.Status.UpdateRevision, d.Status.UpdateRevisionNumber, d.Status.CurrentRevision)
	for _, name := range d.ServiceNames() {
		fmt.Fprintf(&b, "%s:", name)
		for _, w := range d.Status.Services[name].Workloads {
			fmt.Fprintf(&b, " r%d=%d/%d", w.Revision, w.ReadyReplicas, w.Replicas)
		}
		b.WriteString("; ")
	}
	return b.String()
}
