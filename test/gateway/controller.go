// Package gateway is a Gateway controller for tests, written from the Gateway API
// spec (sigs.k8s.io/gateway-api v1.6.3: the doc comments of apis/v1, GEP-1364 on
// status, GEP-709 on ReferenceGrant; each rule cites where it is read). It runs in
// the test process against a real API server (controller-runtime), watches
// HTTPRoutes, Gateways, GatewayClasses, Services, ReferenceGrants and Namespaces, and
// writes each route's status.parents for the parents that are Gateways of a
// GatewayClass naming its controllerName (Judge): Accepted and ResolvedRefs with the
// reasons of shared_types.go, observedGeneration the generation it judged. It routes
// nothing and writes no Gateway status.
//
// A real controller is not instant: Delay passes between judging a route and writing
// its status, and the write is a read-modify-write on the resourceVersion judged, so
// a route changed meanwhile is judged again, never stamped with a generation the
// controller did not see. Writes lists every status write, so that tests wait on
// events, not sleeps.
package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Controller is the test Gateway controller. Set its fields, then Start it.
type Controller struct {
	// Name is the controllerName of the GatewayClasses it implements, e.g.
	// example.com/test-gateway.
	Name gatewayv1.GatewayController
	// Namespaces it watches; none: every namespace.
	Namespaces []string
	// Delay passes between judging a route and writing its status.
	Delay time.Duration

	client client.Client
	mu     sync.Mutex
	writes []Write
}

// Write is one status write of the controller.
type Write struct {
	Route types.NamespacedName
	// Generation is the route's generation it judged, ResourceVersion the route's
	// after the write.
	Generation      int64
	ResourceVersion string
	Parents         []gatewayv1.RouteParentStatus
}

// Scheme has the core types and the Gateway API's v1 types.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err) // static registration; cannot fail
	}
	if err := gatewayv1.Install(s); err != nil {
		panic(err)
	}
	return s
}

// Start runs the controller against the API server of cfg until stop is called;
// stop waits until it has stopped. It returns once its caches have synced.
func (c *Controller) Start(cfg *rest.Config) (stop func() error, err error) {
	opts := ctrl.Options{
		Scheme:                 Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}
	if len(c.Namespaces) > 0 {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range c.Namespaces {
			opts.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("test gateway %s: %w", c.Name, err)
	}
	c.client = mgr.GetClient()
	all := handler.EnqueueRequestsFromMapFunc(c.allRoutes)
	err = ctrl.NewControllerManagedBy(mgr).Named("test-gateway").
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: 4}).
		For(&gatewayv1.HTTPRoute{}).
		Watches(&gatewayv1.Gateway{}, all).
		Watches(&gatewayv1.GatewayClass{}, all).
		Watches(&corev1.Service{}, all).
		Watches(&gatewayv1.ReferenceGrant{}, all).
		Watches(&corev1.Namespace{}, all).
		Complete(c)
	if err != nil {
		return nil, fmt.Errorf("test gateway %s: %w", c.Name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("test gateway %s: caches did not sync: %w", c.Name, <-done)
	}
	return func() error { cancel(); return <-done }, nil
}

// allRoutes enqueues every route: any Gateway, class, Service, grant or namespace
// may change how any route is judged (a test has few).
func (c *Controller) allRoutes(ctx context.Context, _ client.Object) []reconcile.Request {
	var routes gatewayv1.HTTPRouteList
	if err := c.client.List(ctx, &routes); err != nil {
		return nil
	}
	out := make([]reconcile.Request, len(routes.Items))
	for i, r := range routes.Items {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: r.Namespace, Name: r.Name}}
	}
	return out
}

// Reconcile judges one route and, after Delay, writes its status.parents when they
// changed. A conflict means the route changed since it was read: the watch brings the
// newer one, judged anew.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var route gatewayv1.HTTPRoute
	if err := c.client.Get(ctx, req.NamespacedName, &route); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	w, err := c.world(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	parents := Judge(&route, w, c.Name, time.Now())
	if equality.Semantic.DeepEqual(parents, route.Status.Parents) {
		return reconcile.Result{}, nil
	}
	select {
	case <-time.After(c.Delay):
	case <-ctx.Done():
		return reconcile.Result{}, nil
	}
	route.Status.Parents = parents
	if err := c.client.Status().Update(ctx, &route); apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return reconcile.Result{}, nil
	} else if err != nil {
		return reconcile.Result{}, fmt.Errorf("status of HTTPRoute %s: %w", req.NamespacedName, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, Write{Route: req.NamespacedName, Generation: route.Generation, ResourceVersion: route.ResourceVersion, Parents: parents})
	return reconcile.Result{}, nil
}

// world reads what Judge needs from the cache.
func (c *Controller) world(ctx context.Context) (World, error) {
	w := World{Gateways: map[types.NamespacedName]*gatewayv1.Gateway{}, Classes: map[string]*gatewayv1.GatewayClass{},
		Services: map[types.NamespacedName]bool{}, NamespaceLabels: map[string]map[string]string{}}
	var gws gatewayv1.GatewayList
	var classes gatewayv1.GatewayClassList
	var svcs corev1.ServiceList
	var grants gatewayv1.ReferenceGrantList
	var nss corev1.NamespaceList
	for _, l := range []client.ObjectList{&gws, &classes, &svcs, &grants, &nss} {
		if err := c.client.List(ctx, l); err != nil {
			return World{}, fmt.Errorf("test gateway %s: listing %T: %w", c.Name, l, err)
		}
	}
	for i := range gws.Items {
		w.Gateways[client.ObjectKeyFromObject(&gws.Items[i])] = &gws.Items[i]
	}
	for i := range classes.Items {
		w.Classes[classes.Items[i].Name] = &classes.Items[i]
	}
	for i := range svcs.Items {
		w.Services[client.ObjectKeyFromObject(&svcs.Items[i])] = true
	}
	for _, ns := range nss.Items {
		w.NamespaceLabels[ns.Name] = ns.Labels
	}
	w.Grants = grants.Items
	return w, nil
}

// Writes are every status write so far, oldest first.
func (c *Controller) Writes() []Write {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Write(nil), c.writes...)
}

// Judged is the newest generation of route whose status the controller wrote, 0
// before the first write.
func (c *Controller) Judged(route types.NamespacedName) int64 {
	var gen int64
	for _, w := range c.Writes() {
		if w.Route == route {
			gen = w.Generation
		}
	}
	return gen
}
