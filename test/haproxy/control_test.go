package haproxy

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/traffic"
	"github.com/dgd-rollout/operator/traffic/proxy"
)

// graph is one frontend service's proxy, driven as the controller drives it: every
// split rendered by the provider's Objects and written create-or-update (Apply) or
// create-once (Create), its effect judged by the provider's Effect from the status
// ConfigMap and the proxy pods.
type graph struct {
	e    *env
	ns   string
	base traffic.Traffic
	api  *apiProxy
	pods []*pod
	// status is the newest status ConfigMap; changed is closed at each change.
	mu      sync.Mutex
	status  *corev1.ConfigMap
	changed chan struct{}
}

func (e *env) newGraph(tb testing.TB) *graph {
	tb.Helper()
	ns := e.namespace(tb)
	g := &graph{e: e, ns: ns, api: e.startAPIProxy(tb), changed: make(chan struct{}),
		base: traffic.Traffic{
			DGD:      &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llm"}},
			Frontend: "Frontend", Entry: "llm-frontend",
			Config: traffic.Config{AgentImage: "dgd-rollout:test"},
		}}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	g.watchStatus(ctx)
	return g
}

// traffic is the split of cohorts at their weights, with a header route when hr is set.
func (g *graph) traffic(cohorts []traffic.Cohort, hr *traffic.HeaderRoute) traffic.Traffic {
	t := g.base
	t.Cohorts = traffic.Sorted(cohorts)
	t.HeaderRoute = hr
	return t
}

// cohort is f's cohort at weight w: its Service's cluster IP is f's address.
func (g *graph) cohort(f *frontend, w int32) traffic.Cohort {
	return traffic.Cohort{Hash: f.cohort, Service: g.base.Entry + "-" + f.cohort, Address: f.addr.IP.String(),
		Port: int32(f.addr.Port), Weight: w}
}

// write renders t and writes its objects as the controller does; it returns when the
// write of the desired ConfigMap began.
func (g *graph) write(tb testing.TB, t traffic.Traffic) (written time.Time) {
	tb.Helper()
	r, err := proxy.Provider{}.Objects(t)
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	for _, o := range r.Apply {
		o = o.DeepCopyObject().(client.Object)
		if _, ok := o.(*corev1.ConfigMap); ok && o.GetName() == proxy.Name(t) {
			written = time.Now()
		}
		err := g.e.k8s.Create(ctx, o)
		if apierrors.IsAlreadyExists(err) {
			live := o.DeepCopyObject().(client.Object)
			if err = g.e.k8s.Get(ctx, client.ObjectKeyFromObject(o), live); err == nil {
				o.SetResourceVersion(live.GetResourceVersion())
				err = g.e.k8s.Update(ctx, o)
			}
		}
		if err != nil {
			tb.Fatalf("writing %T %s: %v", o, o.GetName(), err)
		}
	}
	for _, o := range r.Create {
		if err := g.e.k8s.Create(ctx, o.DeepCopyObject().(client.Object)); err != nil && !apierrors.IsAlreadyExists(err) {
			tb.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	return written
}

// deployment is t's rendered Deployment.
func deployment(tb testing.TB, t traffic.Traffic) *appsv1.Deployment {
	tb.Helper()
	r, err := proxy.Provider{}.Objects(t)
	if err != nil {
		tb.Fatal(err)
	}
	for _, o := range r.Apply {
		if d, ok := o.(*appsv1.Deployment); ok {
			return d
		}
	}
	tb.Fatal("no Deployment rendered")
	return nil
}

// startPods writes t and runs n proxy pods of its Deployment under the agent's
// ServiceAccount.
func (g *graph) startPods(tb testing.TB, t traffic.Traffic, n int) {
	tb.Helper()
	g.write(tb, t)
	d := deployment(tb, t)
	kubeconfig := g.api.kubeconfig(tb, g.e, g.ns, d.Spec.Template.Spec.ServiceAccountName)
	for i := 0; i < n; i++ {
		g.pods = append(g.pods, g.e.startPod(tb, d, fmt.Sprintf("%s-%c", d.Name, 'a'+i), kubeconfig))
	}
}

// entries are the pods' listeners, which clients reach through the entry Service.
func (g *graph) entries() []string {
	var out []string
	for _, p := range g.pods {
		out = append(out, p.Entry)
	}
	return out
}

// watchStatus keeps the newest status ConfigMap (a watch of it alone).
func (g *graph) watchStatus(ctx context.Context) {
	name := proxy.StatusName(g.base)
	lw := cache.NewFilteredListWatchFromClient(g.e.cs.CoreV1().RESTClient(), "configmaps", g.ns,
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
	keep := func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			g.mu.Lock()
			g.status = cm
			close(g.changed)
			g.changed = make(chan struct{})
			g.mu.Unlock()
		}
	}
	_, inf := cache.NewInformerWithOptions(cache.InformerOptions{ListerWatcher: lw, ObjectType: &corev1.ConfigMap{},
		Handler: cache.ResourceEventHandlerFuncs{AddFunc: keep, UpdateFunc: func(_, o any) { keep(o) }}})
	go inf.RunWithContext(ctx)
}

// effect is the provider's judgement of t now: the status ConfigMap as last seen, the
// running pods, the Deployment ready with them.
func (g *graph) effect(t traffic.Traffic) (traffic.Effect, <-chan struct{}) {
	g.mu.Lock()
	cm, changed := g.status, g.changed
	g.mu.Unlock()
	o := traffic.Observed{Objects: map[string]client.Object{
		traffic.Key("Deployment", proxy.Name(t)): &appsv1.Deployment{Status: appsv1.DeploymentStatus{ReadyReplicas: int32(len(g.pods))}},
	}, Now: time.Now()}
	if cm != nil {
		o.Objects[traffic.Key("ConfigMap", proxy.StatusName(t))] = cm
	}
	for _, p := range g.pods {
		o.Pods = append(o.Pods, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: g.ns}})
	}
	return proxy.Provider{}.Effect(t, o), changed
}

// waitEffect waits, report after report, until cond holds of t's effect, and returns
// when it saw it.
func (g *graph) waitEffect(tb testing.TB, t traffic.Traffic, what string, timeout time.Duration, cond func(traffic.Effect) bool) (time.Time, traffic.Effect) {
	tb.Helper()
	deadline := time.After(timeout)
	for {
		e, changed := g.effect(t)
		if cond(e) {
			return time.Now(), e
		}
		select {
		case <-changed:
		case <-deadline:
			tb.Fatalf("timed out after %s waiting for %s: %+v", timeout, what, e)
		}
	}
}

// inEffect waits until t is in effect.
func (g *graph) inEffect(tb testing.TB, t traffic.Traffic) (time.Time, traffic.Effect) {
	tb.Helper()
	return g.waitEffect(tb, t, "the split in effect", 30*time.Second, func(e traffic.Effect) bool { return e.InEffect })
}
