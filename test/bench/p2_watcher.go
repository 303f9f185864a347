package bench

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dgd-rollout/operator/test/cluster"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"
)

// GangRole is one role (worker service) of a multinode two-role (or more) spec: R
// gangs of Size pods.
type GangRole struct {
	Name     string
	Replicas int32
	Size     int32
}

// Classify names the role and revision of a pod or LeaderWorkerSet of the system
// under test from its labels; ok is false for anything else (a frontend, another
// system's objects).
type Classify func(labels map[string]string) (role, revision string, ok bool)

// GangWatcher observes every Pod and LeaderWorkerSet event of one namespace and,
// between Begin and the end of the rollout, measures what P2 compares: the time until
// every role has exactly its R new-revision gangs, all pods Ready and none of an old
// revision left; peak pods and peak replicas set per role; the minimum of ready gangs
// per role (a gang is ready when all its Size pods are Ready and not terminating, of
// any revision); and the largest ratio skew |n_a/R_a - n_b/R_b| inside any revision's
// pool, n being the spec.replicas of that revision's LeaderWorkerSet for the role,
// over every observed state (states between two writes of one controller pass
// included; PassRecorder gives the states at pass boundaries). It knows nothing of
// the controller driving the LeaderWorkerSets: Classify does.
type GangWatcher struct {
	c        cache.Cache
	ns       string
	roles    []GangRole
	classify Classify
	cancel   context.CancelFunc

	mu        sync.Mutex
	begin     time.Time
	measuring bool
	oldRevs   map[string]bool
	done      chan struct{}
	cleaned   chan struct{}
	steady    bool
	stats     GangStats
	lastSpec  string
	lastAt    time.Time
	lastSkew  float64
	lastLine  string
	specTrans []Transition
	beginLWS  map[string]lwsSnap // name -> role, revision, replicas at Begin
}

type lwsSnap struct {
	role, rev string
	replicas  int32
}

// GangStats is what a GangWatcher measured from Begin.
type GangStats struct {
	// Took: Begin until every role has R ready new-revision gangs, R×Size pods in
	// all (none of an old revision, terminating or not) and no replicas set on an
	// old revision.
	Took time.Duration
	// Cleaned: Begin until, in addition, no old-revision LeaderWorkerSet exists.
	Cleaned time.Duration
	// PeakPods: pods of the role existing at once (any revision, terminating too).
	PeakPods map[string]int
	// PeakSpec: spec.replicas summed over the role's LeaderWorkerSets, at most.
	PeakSpec map[string]int32
	// MinReady: ready gangs of the role (any revision), at least.
	MinReady map[string]int32
	// MaxSkew over every observed LeaderWorkerSet state.
	MaxSkew float64
	// SpecTransitions: every LeaderWorkerSet replica state from Begin on.
	SpecTransitions []Transition
	// Timeline: every change of (replicas set, pods, ready gangs, LWS
	// status.readyReplicas, ready endpoints of the revision's EndpointSlices) per revision.
	Timeline []string
	Events   int
}

// Transition is one observed LeaderWorkerSet replica state: when it appeared, how
// long it held (0 for the last), its pools and its skew.
type Transition struct {
	At, Held time.Duration
	Pools    string
	Skew     float64
}

// WatchGangs starts watching namespace ns.
func WatchGangs(ctx context.Context, cfg *rest.Config, ns string, roles []GangRole, classify Classify) (*GangWatcher, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := lwsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, err
	}
	w := &GangWatcher{c: c, ns: ns, roles: roles, classify: classify,
		done: make(chan struct{}), cleaned: make(chan struct{})}
	ctx, w.cancel = context.WithCancel(ctx)
	for _, obj := range []client.Object{&corev1.Pod{}, &lwsv1.LeaderWorkerSet{}, &discoveryv1.EndpointSlice{}} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			w.cancel()
			return nil, err
		}
		run := func(any) { w.eval() }
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: run, UpdateFunc: func(_, o any) { run(o) }, DeleteFunc: run,
		}); err != nil {
			w.cancel()
			return nil, err
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		w.cancel()
		return nil, fmt.Errorf("gang watcher cache did not sync")
	}
	return w, nil
}

// Stop stops watching.
func (w *GangWatcher) Stop() { w.cancel() }

// Steady reports whether the last observed state is fully rolled out on one
// revision: every role with R ready gangs and nothing else.
func (w *GangWatcher) Steady() bool {
	w.eval()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.steady
}

// Begin starts measuring: the revisions seen so far are old. Call it right before
// writing the change.
func (w *GangWatcher) Begin() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.oldRevs = map[string]bool{}
	ws := w.observe()
	for rev := range ws.revs {
		w.oldRevs[rev] = true
	}
	w.begin, w.measuring = time.Now(), true
	w.stats = GangStats{PeakPods: map[string]int{}, PeakSpec: map[string]int32{}, MinReady: map[string]int32{}}
	w.lastSpec, w.lastLine, w.specTrans = "", "", nil
	w.beginLWS = ws.lws
	w.record(ws, w.begin)
}

// Done is closed when the rollout is complete (GangStats.Took); Cleaned when the old
// LeaderWorkerSets are gone too.
func (w *GangWatcher) Done() <-chan struct{}    { return w.done }
func (w *GangWatcher) Cleaned() <-chan struct{} { return w.cleaned }

// Stats returns a copy of what was measured.
func (w *GangWatcher) Stats() GangStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.PeakPods, s.PeakSpec, s.MinReady = clone(s.PeakPods), clone(s.PeakSpec), clone(s.MinReady)
	s.SpecTransitions = append([]Transition(nil), w.specTrans...)
	s.Timeline = append([]string(nil), s.Timeline...)
	return s
}

func clone[V any](m map[string]V) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// world is one observed state.
type world struct {
	revs      map[string]bool
	pods      map[string]int              // role -> pods
	spec      map[string]map[string]int32 // revision -> role -> replicas set
	ready     map[string]map[string]int32 // revision -> role -> ready gangs
	lwsOfRev  map[string]int              // revision -> LeaderWorkerSets (not being deleted)
	notReady  map[string]int              // role -> pods not Ready or terminating
	readyRole map[string]int32            // role -> ready gangs, any revision
	lws       map[string]lwsSnap
	exist     map[string]map[string]int32 // revision -> role -> pods (terminating too)
	lwsReady  map[string]map[string]int32 // revision -> role -> LWS status.readyReplicas
	esReady   map[string]map[string]int32 // revision -> role -> ready endpoints in the revision's EndpointSlices
}

func (w *GangWatcher) observe() world {
	ws := world{revs: map[string]bool{}, pods: map[string]int{}, spec: map[string]map[string]int32{},
		ready: map[string]map[string]int32{}, lwsOfRev: map[string]int{}, notReady: map[string]int{},
		readyRole: map[string]int32{}, lws: map[string]lwsSnap{},
		exist: map[string]map[string]int32{}, lwsReady: map[string]map[string]int32{}, esReady: map[string]map[string]int32{}}
	add := func(m map[string]map[string]int32, rev, role string, n int32) {
		if m[rev] == nil {
			m[rev] = map[string]int32{}
		}
		m[rev][role] += n
	}
	ctx := context.Background()
	var lwss lwsv1.LeaderWorkerSetList
	if err := w.c.List(ctx, &lwss, client.InNamespace(w.ns)); err == nil {
		for i := range lwss.Items {
			l := &lwss.Items[i]
			role, rev, ok := w.classify(l.Labels)
			if !ok || !l.DeletionTimestamp.IsZero() {
				continue
			}
			ws.revs[rev] = true
			ws.lwsOfRev[rev]++
			if ws.spec[rev] == nil {
				ws.spec[rev] = map[string]int32{}
			}
			ws.spec[rev][role] += ptr.Deref(l.Spec.Replicas, 1)
			ws.lws[l.Name] = lwsSnap{role: role, rev: rev, replicas: ptr.Deref(l.Spec.Replicas, 1)}
			add(ws.lwsReady, rev, role, l.Status.ReadyReplicas)
		}
	}
	// What Dynamo's discovery routes to (a system without per-revision Services has none).
	var slices discoveryv1.EndpointSliceList
	if err := w.c.List(ctx, &slices, client.InNamespace(w.ns)); err == nil {
		for i := range slices.Items {
			es := &slices.Items[i]
			role, rev, ok := w.classify(es.Labels)
			if !ok {
				continue
			}
			for _, ep := range es.Endpoints {
				if ptr.Deref(ep.Conditions.Ready, false) {
					add(ws.esReady, rev, role, 1)
				}
			}
		}
	}
	var pods corev1.PodList
	if err := w.c.List(ctx, &pods, client.InNamespace(w.ns)); err == nil {
		gangs := map[[3]string]int32{} // role, revision, group -> ready pods
		for i := range pods.Items {
			p := &pods.Items[i]
			role, rev, ok := w.classify(p.Labels)
			if !ok {
				continue
			}
			ws.revs[rev] = true
			ws.pods[role]++
			add(ws.exist, rev, role, 1)
			group := p.Labels[lwsv1.GroupUniqueHashLabelKey]
			if group == "" {
				group = p.Name
			}
			k := [3]string{role, rev, group}
			if p.DeletionTimestamp.IsZero() && cluster.PodReady(p) {
				gangs[k]++
			} else {
				ws.notReady[role]++
			}
		}
		size := map[string]int32{}
		for _, r := range w.roles {
			size[r.Name] = r.Size
		}
		for k, n := range gangs {
			if n >= size[k[0]] {
				if ws.ready[k[1]] == nil {
					ws.ready[k[1]] = map[string]int32{}
				}
				ws.ready[k[1]][k[0]]++
				ws.readyRole[k[0]]++
			}
		}
	}
	return ws
}

// eval observes the namespace and updates the measurements.
func (w *GangWatcher) eval() {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	ws := w.observe()
	w.stats.Events++
	w.steady = len(ws.revs) == 1 && w.complete(ws, func(string) bool { return true })
	if !w.measuring {
		return
	}
	select {
	case <-w.done:
	default:
		w.record(ws, now)
		if w.complete(ws, func(rev string) bool { return !w.oldRevs[rev] }) {
			w.stats.Took = now.Sub(w.begin)
			w.closeSpec(now)
			close(w.done)
		}
	}
	select {
	case <-w.done:
		select {
		case <-w.cleaned:
		default:
			for rev := range w.oldRevs {
				if ws.lwsOfRev[rev] > 0 {
					return
				}
			}
			w.stats.Cleaned = now.Sub(w.begin)
			close(w.cleaned)
		}
	default:
	}
}

// complete: every role has R ready gangs of the revisions isNew accepts, R×Size pods
// in all, all Ready, and no replicas set on other revisions.
func (w *GangWatcher) complete(ws world, isNew func(string) bool) bool {
	for _, r := range w.roles {
		var ready int32
		for rev, byRole := range ws.ready {
			if isNew(rev) {
				ready += byRole[r.Name]
			}
		}
		if ready != r.Replicas || ws.pods[r.Name] != int(r.Replicas*r.Size) || ws.notReady[r.Name] != 0 {
			return false
		}
		for rev, byRole := range ws.spec {
			if !isNew(rev) && byRole[r.Name] != 0 {
				return false
			}
		}
	}
	return true
}

// record updates peaks, minimums, skews and the timeline with one observed state.
func (w *GangWatcher) record(ws world, now time.Time) {
	s := &w.stats
	for _, r := range w.roles {
		s.PeakPods[r.Name] = max(s.PeakPods[r.Name], ws.pods[r.Name])
		var spec int32
		for _, byRole := range ws.spec {
			spec += byRole[r.Name]
		}
		s.PeakSpec[r.Name] = max(s.PeakSpec[r.Name], spec)
		if cur, ok := s.MinReady[r.Name]; !ok || ws.readyRole[r.Name] < cur {
			s.MinReady[r.Name] = ws.readyRole[r.Name]
		}
	}
	pools, skew := w.describe(ws.spec), w.skew(ws.spec)
	if pools != w.lastSpec {
		w.closeSpec(now)
		w.lastSpec, w.lastAt, w.lastSkew = pools, now, skew
		s.MaxSkew = math.Max(s.MaxSkew, skew)
	}
	line := "set " + pools + " | pods " + w.describe(ws.exist) + " | gangs ready " + w.describe(ws.ready) +
		" | LWS ready " + w.describe(ws.lwsReady) + " | endpoints ready " + w.describe(ws.esReady)
	if line != w.lastLine {
		w.lastLine = line
		s.Timeline = append(s.Timeline, fmt.Sprintf("%7.3fs  %s", now.Sub(w.begin).Seconds(), line))
	}
}

// closeSpec ends the current LeaderWorkerSet state at now (Held stays 0 when the
// rollout is complete: the final state).
func (w *GangWatcher) closeSpec(now time.Time) {
	if w.lastSpec == "" {
		return
	}
	t := Transition{At: w.lastAt.Sub(w.begin), Pools: w.lastSpec, Skew: w.lastSkew}
	if w.stats.Took == 0 {
		t.Held = now.Sub(w.lastAt)
	}
	w.specTrans = append(w.specTrans, t)
	w.lastSpec = ""
}

// describe renders per-revision, per-role counts as old[p d] new[p d] (role order of
// GangRoles; revisions seen before Begin are old, others new, with a short id).
func (w *GangWatcher) describe(m map[string]map[string]int32) string {
	var revs []string
	for rev := range m {
		revs = append(revs, rev)
	}
	sort.Slice(revs, func(i, j int) bool {
		if w.oldRevs[revs[i]] != w.oldRevs[revs[j]] {
			return w.oldRevs[revs[i]]
		}
		return revs[i] < revs[j]
	})
	var parts []string
	for _, rev := range revs {
		var n []string
		for _, r := range w.roles {
			n = append(n, fmt.Sprint(m[rev][r.Name]))
		}
		tag := "new"
		if w.oldRevs[rev] {
			tag = "old"
		}
		parts = append(parts, fmt.Sprintf("%s:%.5s[%s]", tag, rev, strings.Join(n, " ")))
	}
	return strings.Join(parts, " ")
}

// skew is the largest |n_a/R_a - n_b/R_b| over the role pairs of any revision's pool.
func (w *GangWatcher) skew(spec map[string]map[string]int32) float64 {
	var out float64
	for _, n := range spec {
		for i, a := range w.roles {
			for _, b := range w.roles[i+1:] {
				if a.Replicas > 0 && b.Replicas > 0 {
					out = math.Max(out, math.Abs(float64(n[a.Name])/float64(a.Replicas)-float64(n[b.Name])/float64(b.Replicas)))
				}
			}
		}
	}
	return out
}
