package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/traffic/proxy"
)

// PlayProxies plays, for a DGD's traffic proxies (the Deployments labelled
// v1alpha1.LabelTrafficProxy, traffic/proxy), what a cluster without containers lacks:
// the ReplicaSet's pods (one Pending pod object per ready replica, with the pod
// template's labels, which is all the operator reads of them: their metadata), and the
// agent beside HAProxy in each, which applies the desired split at once and reports it
// in the status ConfigMap as the real agent does (traffic/proxy/agent: a merge patch of
// the pod's key, a proxy.Report of the split's version, its weights and header route,
// nothing in flight unless InFlight says so). PlayDeployments plays the Deployment's
// own status. It returns whether anything changed.
func (e *Env) PlayProxies(ctx context.Context, ns, dgd string) (bool, error) {
	ds, err := e.Deployments(ctx, ns, dgd)
	if err != nil {
		return false, err
	}
	changed := false
	for i := range ds {
		d := &ds[i]
		if d.Labels[v1alpha1.LabelTrafficProxy] == "" || !d.DeletionTimestamp.IsZero() {
			continue
		}
		pods, c, err := e.proxyPods(ctx, d)
		if err != nil {
			return false, err
		}
		r, err := e.proxyReports(ctx, d, pods)
		if err != nil {
			return false, err
		}
		changed = changed || c || r
	}
	return changed, nil
}

// ProxyInFlight, when set, says how many requests each proxy pod has in flight to a
// cohort (by hash) in the reports PlayProxies writes.
var ProxyInFlight func(hash string) int64

// proxyPods makes the pods of proxy Deployment d match its available replicas:
// `<deployment>-<i>`, the template's labels, controlled by nothing (the operator reads
// pods by label).
func (e *Env) proxyPods(ctx context.Context, d *appsv1.Deployment) ([]string, bool, error) {
	want := d.Status.AvailableReplicas
	changed := false
	var names []string
	for i := int32(0); i < max(want, ptr.Deref(d.Spec.Replicas, 1)); i++ {
		name := fmt.Sprintf("%s-%d", d.Name, i)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: name, Labels: d.Spec.Template.Labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "haproxy", Image: "haproxy"}}}}
		if i >= want {
			if err := e.Client.Delete(ctx, pod); err == nil {
				changed = true
			} else if !apierrors.IsNotFound(err) {
				return nil, false, err
			}
			continue
		}
		names = append(names, name)
		switch err := e.Client.Create(ctx, pod); {
		case err == nil:
			changed = true
		case !apierrors.IsAlreadyExists(err):
			return nil, false, fmt.Errorf("playing proxy pod %s: %w", name, err)
		}
	}
	return names, changed, nil
}

// proxyReports writes each pod's report of the split d's desired ConfigMap asks.
func (e *Env) proxyReports(ctx context.Context, d *appsv1.Deployment, pods []string) (bool, error) {
	var desired, status corev1.ConfigMap
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.Name}, &desired); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.Name + "-status"}, &status); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	split, version, err := proxy.ParseSplit(desired.Data)
	if err != nil {
		return false, fmt.Errorf("the desired split of %s: %w", d.Name, err)
	}
	rep := proxy.Report{Version: version, Time: time.Now().UTC().Truncate(time.Second), Cohorts: map[string]proxy.CohortReport{}}
	for _, c := range split.Cohorts {
		cr := proxy.CohortReport{Weight: c.Weight}
		if ProxyInFlight != nil {
			cr.InFlight = ProxyInFlight(c.Hash)
		}
		rep.Cohorts[c.Hash] = cr
	}
	rep.HeaderRoute = split.Pinned()
	data := map[string]string{}
	sort.Strings(pods)
	for _, p := range pods {
		old, _ := proxy.ParseReport(status.Data[p])
		if old.Version == rep.Version && sameCohorts(old.Cohorts, rep.Cohorts) && old.HeaderRoute == rep.HeaderRoute {
			continue
		}
		b, err := json.Marshal(rep)
		if err != nil {
			return false, err
		}
		data[p] = string(b)
	}
	if len(data) == 0 {
		return false, nil
	}
	patch, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return false, err
	}
	if err := e.Client.Patch(ctx, &status, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return true, nil
}

func sameCohorts(a, b map[string]proxy.CohortReport) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
