// Package observe watches one namespace of a live API server and checks, at every state
// it observes, what the Dynamo runtime in the DGD's pods would do with it, since KWOK
// and envtest never start a container:
//
//   - it plays every pod's runtime: a worker pod that runs gets the DynamoWorkerMetadata
//     its runtime would publish (dynamoview.Publish);
//   - discovery: from the EndpointSlices (or, where no EndpointSlice controller runs,
//     the slices it would make from the Services) and those objects, what every
//     frontend discovers (dynamoview): no Dynamo namespace ever holds workers of two
//     revisions (a prefill would discover a decode of another generation), and once a
//     frontend has discovered a ready generation it never has none (no zero-routable
//     gap, Dynamo issue 13622), except under strategy Recreate, which stops the old
//     revision before the new one starts. A gap is a violation unless discovery lag is
//     proven at every state of it: every worker pod the frontend routed to at the last
//     ready state still runs (not terminating), and every Service and EndpointSlice
//     that listed it then as a ready endpoint still exists (the same object) and still
//     lists it. Such a gap is discovery behind objects nobody removed (an endpoint's
//     condition, a cache behind another); it is counted (Stats.LagGaps, its states and
//     length) for the test to bound, not failed. Anything else, at any state of the
//     gap, is a violation naming what went: a Service deleted early, a slice rewritten
//     without the pod, a pod drained;
//   - gang formation: for every complete LeaderWorkerSet group and Grove scaling group
//     replica, its members, their env expanded as the kubelet would, agree on the gang's
//     size and leader, which is the gang's own leader pod, with ranks 0..N-1 (gangs);
//   - cohorts (cohorts.go), while a DGD has cohort frontends: no frontend pod can
//     discover a worker of another revision; every cohort the traffic provider's own
//     objects send traffic to (the proxy's desired split and its agents' reports, the
//     HTTPRoute its parents accepted) has a ready frontend and a routable pool; the
//     stable entry Service keeps a ready endpoint once it had one.
//
// With cohorts, the frontend of the gap check above is every live frontend pod: a gap
// is a state in which none of them discovers a ready generation.
package observe

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/dynamoview"
	"github.com/dgd-rollout/operator/test/gangs"
)

// Options say what to observe.
type Options struct {
	Config    *rest.Config
	Namespace string
	// DGD names the graph whose strategy decides whether a gap is allowed; empty: any
	// DGD of the namespace.
	DGD string
	// SyntheticSlices derives EndpointSlices from the namespace's Services and pods as
	// the EndpointSlice controller would (envtest runs none).
	SyntheticSlices bool
	// Check, when set, judges every observed state too (a spec's own rules, read from
	// the same live objects); what it returns are violations.
	Check func(State) []string
}

// State is one observed state of the namespace, as Options.Check sees it: the objects
// the cache holds and what Dynamo's discovery makes of them.
type State struct {
	Pods     []corev1.Pod
	Slices   []discoveryv1.EndpointSlice
	Services []corev1.Service
	View     dynamoview.View
}

// Stats are what an Observer saw.
type Stats struct {
	// States is how many observed states were checked.
	States int
	// Gangs is how many distinct complete gangs were checked.
	Gangs int
	// ReadyGenerations lists every Dynamo namespace a frontend discovered ready.
	ReadyGenerations []string
	// Published counts the DynamoWorkerMetadata objects played runtimes created.
	Published int
	// LagGaps counts gaps (runs of states with no ready generation after one was
	// discovered) proven at every state to be discovery lag: the pods, Services and
	// EndpointSlices the frontend last routed through all still there.
	LagGaps int
	// LagGapStates counts the states of those gaps, LagGapTime their summed length and
	// LongestLagGap the longest (from its first state to the first ready one after it,
	// or to Stop).
	LagGapStates  int
	LagGapTime    time.Duration
	LongestLagGap time.Duration
	// LagGapCauses says, for up to the first five gaps, what the frontend missed at
	// their first state (the generations and why each worker pod was not visible).
	LagGapCauses []string
	// CohortStates counts the states checked while a DGD had (or had had) cohorts;
	// TrafficStates, per entry Service, those in which the provider's objects sent
	// traffic to a cohort, SplitStates those in which they sent it to two or more;
	// Receivers is the most cohorts one entry sent to at once.
	CohortStates, TrafficStates, SplitStates, Receivers int
}

// Observer checks a namespace at every event until stopped.
type Observer struct {
	opts   Options
	cache  cache.Cache
	writer client.Client
	reader client.Reader // the API server, uncached (services.go confirms a failure on it)
	cancel context.CancelFunc
	kick   chan struct{}
	done   chan struct{}

	mu         sync.Mutex
	violations []string
	seen       map[string]bool
	everReady  bool
	// routed are the worker pods (by UID) of the ready generations at the last state
	// with one, and the EndpointSlices that listed each as a ready endpoint then.
	routed map[types.UID]route
	// gap is the gap under way (nil: a ready generation is discovered, or a gap is
	// allowed).
	gap   *gap
	gangs map[string]bool
	stats Stats
	ready map[string]bool
	// routes: the API server serves HTTPRoutes (the Gateway API CRDs are installed).
	routes bool
	// accepted is, per HTTPRoute, the spec of the newest generation its parents all
	// accepted; cohortsSeen the DGDs that have had cohort frontends, entryArmed the
	// entry Services that have had a ready endpoint since (cohorts.go).
	accepted    map[string]*gatewayv1.HTTPRouteSpec
	cohortsSeen map[string]bool
	entryArmed  map[string]bool
}

// route is how the frontend reached one worker pod at the last ready state.
type route struct {
	pod    string
	slices []sliceRef
}

// sliceRef names an EndpointSlice (UID empty for a synthetic one: its name stands for
// its Service's) and the Service it belongs to.
type sliceRef struct {
	name, service string
	uid           types.UID
}

// gap is a run of states with no ready generation.
type gap struct {
	start  time.Time
	states int
	failed bool // a state of it was not proven to be lag (a violation was recorded)
}

// Start starts observing.
func Start(ctx context.Context, opts Options) (*Observer, error) {
	c, err := cache.New(opts.Config, cache.Options{Scheme: app.NewScheme(), DefaultNamespaces: map[string]cache.Config{opts.Namespace: {}}})
	if err != nil {
		return nil, err
	}
	writer, err := client.New(opts.Config, client.Options{Scheme: app.NewScheme(), Cache: &client.CacheOptions{Reader: c, Unstructured: true}})
	if err != nil {
		return nil, err
	}
	o := &Observer{opts: opts, cache: c, writer: writer, kick: make(chan struct{}, 1), done: make(chan struct{}),
		seen: map[string]bool{}, gangs: map[string]bool{}, ready: map[string]bool{},
		accepted: map[string]*gatewayv1.HTTPRouteSpec{}, cohortsSeen: map[string]bool{}, entryArmed: map[string]bool{}}
	if o.reader, err = client.New(opts.Config, client.Options{Scheme: app.NewScheme()}); err != nil {
		return nil, err
	}
	dwm := &unstructured.Unstructured{}
	dwm.SetGroupVersionKind(dynamoview.DWMGVK)
	// Services are read in both modes: a gap is lag only while the Services the frontend
	// routed through still exist.
	// ConfigMaps and HTTPRoutes are the traffic providers' objects (cohorts.go); the
	// latter only where the Gateway API CRDs are installed.
	kinds := []client.Object{&corev1.Pod{}, dwm, &v1alpha1.DynamoGraphDeployment{}, &corev1.Service{}, &corev1.ConfigMap{}}
	if !opts.SyntheticSlices {
		kinds = append(kinds, &discoveryv1.EndpointSlice{})
	}
	if o.routes, err = served(opts.Config, gatewayv1.SchemeGroupVersion.WithKind("HTTPRoute")); err != nil {
		return nil, err
	}
	if o.routes {
		kinds = append(kinds, &gatewayv1.HTTPRoute{})
	}
	run := func() { o.check(); o.poke() }
	h := toolscache.ResourceEventHandlerFuncs{AddFunc: func(any) { run() }, UpdateFunc: func(any, any) { run() }, DeleteFunc: func(any) { run() }}
	for _, k := range kinds {
		inf, err := c.GetInformer(ctx, k)
		if err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(h); err != nil {
			return nil, err
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	o.cancel = cancel
	go func() { _ = c.Start(cctx) }()
	if !c.WaitForCacheSync(cctx) {
		cancel()
		return nil, fmt.Errorf("observer cache of %s did not sync", opts.Namespace)
	}
	go o.publish(cctx)
	return o, nil
}

// Stop stops observing. A gap still under way counts as it stands.
func (o *Observer) Stop() {
	o.cancel()
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closeGap()
}

func (o *Observer) poke() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// publish plays the runtimes of running worker pods, one round per burst of events.
func (o *Observer) publish(ctx context.Context) {
	defer close(o.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-o.kick:
		}
		var pods corev1.PodList
		if err := o.cache.List(ctx, &pods, client.InNamespace(o.opts.Namespace)); err != nil {
			continue
		}
		before := o.countDWMs(ctx)
		if err := dynamoview.Publish(ctx, o.writer, pods.Items); err != nil && ctx.Err() == nil {
			o.fail("publishing DynamoWorkerMetadata: " + err.Error())
		}
		o.mu.Lock()
		o.stats.Published += max(0, o.countDWMs(ctx)-before)
		o.mu.Unlock()
	}
}

func (o *Observer) countDWMs(ctx context.Context) int {
	var l unstructured.UnstructuredList
	l.SetGroupVersionKind(dynamoview.DWMGVK.GroupVersion().WithKind(dynamoview.DWMKind + "List"))
	if o.cache.List(ctx, &l, client.InNamespace(o.opts.Namespace)) != nil {
		return 0
	}
	return len(l.Items)
}

// Violations returns every distinct violation seen, first first.
func (o *Observer) Violations() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.violations...)
}

// Stats returns what the observer saw.
func (o *Observer) Stats() Stats {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.stats
	s.ReadyGenerations = nil
	for ns := range o.ready {
		s.ReadyGenerations = append(s.ReadyGenerations, ns)
	}
	sort.Strings(s.ReadyGenerations)
	return s
}

// Frontend is what the DGD's frontend discovers now.
func (o *Observer) Frontend(ctx context.Context) (dynamoview.FrontendView, error) {
	pods, slices, dwms, _, err := o.read(ctx)
	if err != nil {
		return dynamoview.FrontendView{}, err
	}
	fes := liveFrontends(pods)
	if len(fes) == 0 {
		return dynamoview.FrontendView{}, fmt.Errorf("no frontend pod in %s", o.opts.Namespace)
	}
	return dynamoview.Compute(pods, slices, dwms).FrontendFor(fes[0]), nil
}

func (o *Observer) fail(v string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.seen[v] {
		o.seen[v] = true
		o.violations = append(o.violations, v)
	}
}

func (o *Observer) read(ctx context.Context) ([]corev1.Pod, []discoveryv1.EndpointSlice, []unstructured.Unstructured, []corev1.Service, error) {
	var pods corev1.PodList
	if err := o.cache.List(ctx, &pods, client.InNamespace(o.opts.Namespace)); err != nil {
		return nil, nil, nil, nil, err
	}
	var dwms unstructured.UnstructuredList
	dwms.SetGroupVersionKind(dynamoview.DWMGVK.GroupVersion().WithKind(dynamoview.DWMKind + "List"))
	if err := o.cache.List(ctx, &dwms, client.InNamespace(o.opts.Namespace)); err != nil {
		return nil, nil, nil, nil, err
	}
	var svcs corev1.ServiceList
	if err := o.cache.List(ctx, &svcs, client.InNamespace(o.opts.Namespace)); err != nil {
		return nil, nil, nil, nil, err
	}
	var slices []discoveryv1.EndpointSlice
	if o.opts.SyntheticSlices {
		slices = Slices(svcs.Items, pods.Items)
	} else {
		var l discoveryv1.EndpointSliceList
		if err := o.cache.List(ctx, &l, client.InNamespace(o.opts.Namespace)); err != nil {
			return nil, nil, nil, nil, err
		}
		slices = l.Items
	}
	return pods.Items, slices, dwms.Items, svcs.Items, nil
}

// check checks the state the cache holds now.
func (o *Observer) check() {
	ctx := context.Background()
	pods, slices, dwms, svcs, err := o.read(ctx)
	if err != nil {
		return
	}
	view := dynamoview.Compute(pods, slices, dwms)
	for _, v := range dynamoview.CheckIsolation(view) {
		o.fail("isolation: " + v)
	}
	o.checkFrontends(view, pods, slices, svcs, o.gapAllowed(ctx))
	o.checkGangs(pods)
	o.checkServices(ctx, pods)         // services.go
	o.checkRoutable(ctx, pods, slices) // services.go
	if st, err := o.cohortState(ctx, pods, slices, svcs); err == nil {
		o.checkCohorts(ctx, st, view) // cohorts.go
	}
	if o.opts.Check != nil {
		for _, v := range o.opts.Check(State{Pods: pods, Slices: slices, Services: svcs, View: view}) {
			o.fail(v)
		}
	}
	o.mu.Lock()
	o.stats.States++
	o.mu.Unlock()
}

// cohortState is the cached state the cohort checks read.
func (o *Observer) cohortState(ctx context.Context, pods []corev1.Pod, slices []discoveryv1.EndpointSlice, svcs []corev1.Service) (CohortState, error) {
	st := CohortState{Pods: pods, Slices: slices, Services: svcs}
	ns := client.InNamespace(o.opts.Namespace)
	var dgds v1alpha1.DynamoGraphDeploymentList
	var cms corev1.ConfigMapList
	if err := o.cache.List(ctx, &dgds, ns); err != nil {
		return st, err
	}
	if err := o.cache.List(ctx, &cms, ns); err != nil {
		return st, err
	}
	for _, d := range dgds.Items {
		if o.opts.DGD == "" || d.Name == o.opts.DGD {
			st.DGDs = append(st.DGDs, d)
		}
	}
	st.ConfigMaps = cms.Items
	if o.routes {
		var rs gatewayv1.HTTPRouteList
		if err := o.cache.List(ctx, &rs, ns); err != nil {
			return st, err
		}
		st.Routes = rs.Items
	}
	return st, nil
}

// served reports whether the API server of cfg serves gvk.
func served(cfg *rest.Config, gvk schema.GroupVersionKind) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	list, err := dc.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Kind == gvk.Kind {
			return true, nil
		}
	}
	return false, nil
}

// gapAllowed reports whether the observed DGD (any, when none is named) may leave the
// frontend without workers: strategy Recreate stops the old revision before the new one
// starts, and a DGD being deleted (or gone) takes its whole graph down on purpose.
func (o *Observer) gapAllowed(ctx context.Context) bool {
	var dgds v1alpha1.DynamoGraphDeploymentList
	if o.cache.List(ctx, &dgds, client.InNamespace(o.opts.Namespace)) != nil {
		return false
	}
	found := false
	for _, d := range dgds.Items {
		if o.opts.DGD != "" && d.Name != o.opts.DGD {
			continue
		}
		found = true
		if d.DeletionTimestamp != nil || d.RolloutOrDefault().Strategy == v1alpha1.RecreateStrategy {
			return true
		}
	}
	return o.opts.DGD != "" && !found
}

// checkFrontends: once a frontend has discovered a ready generation, it always has one,
// or the gap is proven to be discovery lag at every one of its states (see the package
// doc).
func (o *Observer) checkFrontends(view dynamoview.View, pods []corev1.Pod, slices []discoveryv1.EndpointSlice, svcs []corev1.Service, gapAllowed bool) {
	fes := liveFrontends(pods)
	if len(fes) == 0 {
		return
	}
	fv, ready := readyAnywhere(view, fes)
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, g := range ready {
		o.ready[g.Namespace] = true
	}
	switch {
	case len(ready) > 0:
		o.everReady = true
		o.closeGap()
		o.routed = routes(view, fes[0].PodNamespace, ready, slices)
	case !o.everReady:
	case gapAllowed:
		o.gap = nil // Recreate, or the graph being deleted: neither judged nor counted
	default:
		if o.gap == nil {
			o.gap = &gap{start: time.Now()}
			if len(o.stats.LagGapCauses) < 5 {
				o.stats.LagGapCauses = append(o.stats.LagGapCauses, fmt.Sprintf("generations %s; worker pods: %s", describe(fv), describePods(view, pods)))
			}
		}
		o.gap.states++
		if o.gap.failed {
			return
		}
		if why := unproven(o.routed, pods, slices, svcs); why != "" {
			o.gap.failed = true
			v := fmt.Sprintf("zero-routable gap (state %d of it, %s in): %s; the frontend (prefix %q, strict %v) discovers no ready generation; generations %s; worker pods: %s; slices: %s",
				o.gap.states, time.Since(o.gap.start).Round(time.Millisecond), why, fes[0].Prefix, fes[0].Strict, describe(fv), describePods(view, pods), describeSlices(slices))
			if !o.seen[v] {
				o.seen[v] = true
				o.violations = append(o.violations, v)
			}
		}
	}
}

// liveFrontends are the frontend runtimes of pods not being deleted, or every one when
// all are (a frontend updated in place, or a cohort's, terminates while others start).
func liveFrontends(pods []corev1.Pod) []dynamoview.Runtime {
	all := dynamoview.Frontends(pods)
	deleting := map[string]bool{}
	for i := range pods {
		deleting[pods[i].Name] = !pods[i].DeletionTimestamp.IsZero()
	}
	var live []dynamoview.Runtime
	for _, rt := range all {
		if !deleting[rt.PodName] {
			live = append(live, rt)
		}
	}
	if len(live) == 0 {
		return all
	}
	return live
}

// readyAnywhere is what the frontends discover: the view of the first, and the ready
// generations any of them discovers (a shared frontend's pods all discover the same;
// each cohort's frontend discovers its own revision's alone), sorted.
func readyAnywhere(view dynamoview.View, fes []dynamoview.Runtime) (dynamoview.FrontendView, []dynamoview.Generation) {
	first := view.FrontendFor(fes[0])
	seen := map[string]bool{}
	byNS := map[string]dynamoview.Generation{}
	for _, rt := range fes {
		key := fmt.Sprintf("%s|%s|%v", rt.Namespace, rt.Prefix, rt.Strict)
		if seen[key] {
			continue
		}
		seen[key] = true
		for _, g := range view.FrontendFor(rt).ReadyGenerations() {
			byNS[g.Namespace] = g
		}
	}
	var ready []dynamoview.Generation
	for _, ns := range slices.Sorted(maps.Keys(byNS)) {
		ready = append(ready, byNS[ns])
	}
	return first, ready
}

// closeGap ends the gap under way: one proven at every state is counted as lag.
func (o *Observer) closeGap() {
	g := o.gap
	o.gap = nil
	if g == nil || g.failed {
		return
	}
	d := time.Since(g.start)
	o.stats.LagGaps++
	o.stats.LagGapStates += g.states
	o.stats.LagGapTime += d
	o.stats.LongestLagGap = max(o.stats.LongestLagGap, d)
}

// routes are the worker pods of the ready generations, each with the EndpointSlices
// that list it as a ready endpoint: what the frontend routes through.
func routes(view dynamoview.View, k8sNamespace string, ready []dynamoview.Generation, slices []discoveryv1.EndpointSlice) map[types.UID]route {
	gens := map[string]bool{}
	for _, g := range ready {
		gens[g.Namespace] = true
	}
	out := map[types.UID]route{}
	for _, in := range view.Instances(k8sNamespace) {
		serves := false
		for _, ns := range in.DynamoNamespaces() {
			serves = serves || gens[ns]
		}
		if serves {
			out[types.UID(in.PodUID)] = route{pod: in.PodName}
		}
	}
	addSlices(out, slices)
	return out
}

// addSlices records, for every pod of routed, the slices that list it as a ready
// endpoint.
func addSlices(routed map[types.UID]route, slices []discoveryv1.EndpointSlice) {
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if e.TargetRef == nil || e.Conditions.Ready == nil || !*e.Conditions.Ready {
				continue
			}
			if r, ok := routed[e.TargetRef.UID]; ok {
				r.slices = append(r.slices, sliceRef{name: s.Name, uid: s.UID, service: s.Labels[discoveryv1.LabelServiceName]})
				routed[e.TargetRef.UID] = r
			}
		}
	}
}

// unproven says why a state with no ready generation is not proven to be discovery
// lag ("" when it is): a pod the frontend routed to is gone or terminating, or a
// Service or EndpointSlice it routed through is gone (or another object now has its
// name) or no longer lists it.
func unproven(routed map[types.UID]route, pods []corev1.Pod, slices []discoveryv1.EndpointSlice, svcs []corev1.Service) string {
	alive := map[types.UID]bool{}
	for i := range pods {
		if pods[i].DeletionTimestamp == nil {
			alive[pods[i].UID] = true
		}
	}
	byName := map[string]*discoveryv1.EndpointSlice{}
	for i := range slices {
		byName[slices[i].Name] = &slices[i]
	}
	services := map[string]bool{}
	for i := range svcs {
		if svcs[i].DeletionTimestamp == nil {
			services[svcs[i].Name] = true
		}
	}
	uids := make([]string, 0, len(routed))
	for uid := range routed {
		uids = append(uids, string(uid))
	}
	sort.Strings(uids)
	var why []string
	for _, u := range uids {
		uid := types.UID(u)
		r := routed[uid]
		if !alive[uid] {
			why = append(why, fmt.Sprintf("pod %s the frontend routed to is gone or terminating", r.pod))
			continue
		}
		for _, ref := range r.slices {
			s := byName[ref.name]
			switch {
			case ref.service != "" && !services[ref.service]:
				why = append(why, fmt.Sprintf("Service %s that routed to pod %s is gone", ref.service, r.pod))
			case s == nil || ref.uid != "" && s.UID != ref.uid:
				why = append(why, fmt.Sprintf("EndpointSlice %s that routed to pod %s is gone", ref.name, r.pod))
			case !lists(s, uid):
				why = append(why, fmt.Sprintf("EndpointSlice %s no longer lists pod %s", ref.name, r.pod))
			}
		}
	}
	return strings.Join(why, "; ")
}

// lists reports whether the slice has an endpoint (in any condition) for the pod.
func lists(s *discoveryv1.EndpointSlice, uid types.UID) bool {
	for _, e := range s.Endpoints {
		if e.TargetRef != nil && e.TargetRef.UID == uid {
			return true
		}
	}
	return false
}

// describePods says, for every worker pod, whether it is ready or going and why the
// frontend does not see it: what a gap's report needs to name its cause.
func describePods(view dynamoview.View, pods []corev1.Pod) string {
	var out []string
	for i := range pods {
		p := &pods[i]
		rt, ok := dynamoview.RuntimeOf(p)
		if !ok || !rt.IsWorker() {
			continue
		}
		why := view.Excluded(p.Namespace)[p.Name]
		if why == "" && !view.Visible(p.Namespace, p.Name) {
			why = "no ready endpoint and no DWM"
		}
		out = append(out, fmt.Sprintf("%s(uid %s, phase %s, ready %v, deleting %v, %s)", p.Name, string(p.UID)[:8], p.Status.Phase,
			cluster.PodReady(p), p.DeletionTimestamp != nil, cmp.Or(why, "visible")))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func describeSlices(slices []discoveryv1.EndpointSlice) string {
	var out []string
	for _, s := range slices {
		n := 0
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				n++
			}
		}
		out = append(out, fmt.Sprintf("%s(%d/%d ready)", s.Name, n, len(s.Endpoints)))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func describe(fv dynamoview.FrontendView) string {
	out := "["
	for i, g := range fv.Generations {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%s ready=%v workers=%v missing=%v", g.Namespace, g.Ready, g.Workers, g.Missing)
	}
	return out + "]"
}

// checkGangs checks every complete gang (every member present and not being deleted).
func (o *Observer) checkGangs(pods []corev1.Pod) {
	all := gangs.GroupLWS(pods)
	for k, g := range gangs.GroupGrove(pods) {
		all[k] = g
	}
	for key, g := range all {
		n := nodeCount(g)
		if n < 2 || len(g.Members) != n || g.Leader == nil {
			continue
		}
		for _, v := range gangs.Check(g, n) {
			o.fail(fmt.Sprintf("gang %s: %s", key, v))
		}
		o.mu.Lock()
		o.gangs[key] = true
		o.stats.Gangs = len(o.gangs)
		o.mu.Unlock()
	}
}

// nodeCount is a gang's size as its workload made it: LWS's size annotation, or
// Grove's GROVE_PCSG_TEMPLATE_NUM_PODS on its members' main container.
func nodeCount(g *gangs.Gang) int {
	for _, m := range g.Members {
		if v, ok := m.Pod.Annotations["leaderworkerset.sigs.k8s.io/size"]; ok {
			n, _ := strconv.Atoi(v)
			return n
		}
		if c := gangs.MainContainer(m.Pod); c != nil {
			for _, e := range c.Env {
				if e.Name == "GROVE_PCSG_TEMPLATE_NUM_PODS" {
					n, _ := strconv.Atoi(e.Value)
					return n
				}
			}
		}
	}
	return 0
}

// Slices are the EndpointSlices the EndpointSlice controller would keep for services:
// one per Service with a selector, carrying its labels, an endpoint per selected pod,
// ready when the pod is ready and not terminating, or always with
// publishNotReadyAddresses (k8s.io/endpointslice utils.go podToEndpoint).
func Slices(services []corev1.Service, pods []corev1.Pod) []discoveryv1.EndpointSlice {
	var out []discoveryv1.EndpointSlice
	for _, svc := range services {
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		l := map[string]string{discoveryv1.LabelServiceName: svc.Name}
		for k, v := range svc.Labels {
			l[k] = v
		}
		s := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name + "-synthetic", Labels: l},
			AddressType: discoveryv1.AddressTypeIPv4}
		for i := range pods {
			p := &pods[i]
			if !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			serving := cluster.PodReady(p)
			terminating := p.DeletionTimestamp != nil
			ready := svc.Spec.PublishNotReadyAddresses || serving && !terminating
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}})
		}
		out = append(out, s)
	}
	return out
}
