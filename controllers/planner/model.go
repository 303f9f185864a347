package planner

import (
	"math"
	"slices"
	"sort"
)

// service is one worker service as the planner sees it. Services known only from
// workloads (removed from the spec) are retired: r = 0.
type service struct {
	name  string
	r     int64 // R_s
	surge int64
	unav  int64
	uf    bool  // UnreadyFirst
	hold  int64 // O_s when a partition applies, else 0
}

// active services have desired replicas; only they take part in ratio, orphan,
// surge and availability. Retired ones drain with their pool.
func (s service) active() bool { return s.r > 0 }

// pool is one revision's workloads as vectors indexed like model.svcs.
type pool struct {
	rev    int64
	update bool
	member []bool  // the revision has a workload of the service (update: every spec service)
	active []int   // indices of the active services among the members
	spec   []int64 // replicas set now
	cur    []int64 // replicas that exist
	ready  []int64 // min(Ready, Spec): replicas above Spec are terminating
	goal   []int64 // where this pool ends (active services only)
	target []int64 // the plan
}

// model is the planner's view of one Input.
type model struct {
	in      Input
	svcs    []service
	index   map[string]int
	nspec   int     // svcs[:nspec] come from the spec
	pools   []*pool // ascending revision
	upd     *pool
	r       []int64 // R_s per service: the ratio denominators
	base    *pool   // oldest old pool holding replicas: keeps the partition, drains last
	strict  int64   // 1 while planning a lockstep step (the open ratio window), else 0
	blocked string  // why no step is planned (PhaseBlocked), "" otherwise
}

func newModel(in Input) *model {
	m := &model{in: in, index: make(map[string]int, len(in.Spec.Services)),
		svcs: make([]service, 0, len(in.Spec.Services))}
	for _, s := range uniqueServices(in.Spec.Services) {
		surge, unav := ResolveBudgets(s)
		m.add(service{name: s.Name, r: int64(max(s.Replicas, 0)), surge: int64(surge),
			unav: int64(unav), uf: s.UnreadyFirst})
	}
	m.nspec = len(m.svcs)
	for _, name := range m.unknownServices() {
		m.add(service{name: name, uf: true})
	}
	m.r = make([]int64, len(m.svcs))
	for i, s := range m.svcs {
		m.r[i] = s.r
	}
	m.addPools()
	return m
}

func (m *model) add(s service) {
	m.index[s.name] = len(m.svcs)
	m.svcs = append(m.svcs, s)
}

// unknownServices are the sorted names that have workloads but no spec entry.
func (m *model) unknownServices() []string {
	var out []string
	for _, w := range m.in.Workloads {
		if _, ok := m.index[w.Service]; !ok && !slices.Contains(out, w.Service) {
			out = append(out, w.Service)
		}
	}
	sort.Strings(out)
	return out
}

// addPools groups workloads by revision (repeated (service, revision) entries are
// summed; the caller should not send any) and makes sure the update pool exists.
func (m *model) addPools() {
	byRev := make(map[int64]*pool, 4)
	get := func(rev int64) *pool {
		if p, ok := byRev[rev]; ok {
			return p
		}
		p := m.newPool(rev)
		byRev[rev] = p
		m.pools = append(m.pools, p)
		return p
	}
	for _, w := range m.in.Workloads {
		p, i := get(w.Revision), m.index[w.Service]
		p.member[i] = true
		p.spec[i] += int64(max(w.Spec, 0))
		p.cur[i] += int64(max(w.Current, 0))
		p.ready[i] += int64(max(w.Ready, 0))
	}
	m.upd = get(m.in.UpdateRevision)
	m.upd.update = true
	for i := range m.nspec {
		m.upd.member[i] = true
	}
	for _, p := range m.pools {
		for i, s := range m.svcs {
			p.spec[i] = min(p.spec[i], math.MaxInt32)
			p.ready[i] = min(p.ready[i], p.spec[i])
			if s.active() && p.member[i] {
				p.active = append(p.active, i)
			}
		}
		copy(p.target, p.spec)
	}
	sort.Slice(m.pools, func(a, b int) bool { return m.pools[a].rev < m.pools[b].rev })
}

func (m *model) newPool(rev int64) *pool {
	n := len(m.svcs)
	return &pool{rev: rev, member: make([]bool, n), spec: make([]int64, n), cur: make([]int64, n),
		ready: make([]int64, n), goal: make([]int64, n), target: make([]int64, n)}
}

// old returns the old pools, newest first.
func (m *model) old() []*pool {
	var out []*pool
	for i := len(m.pools) - 1; i >= 0; i-- {
		if !m.pools[i].update {
			out = append(out, m.pools[i])
		}
	}
	return out
}

// inProgress reports whether an old revision still has replicas set or existing: only
// then is there a rollout for Paused to freeze.
func (m *model) inProgress() bool {
	for _, p := range m.old() {
		if sum(p.spec) > 0 || sum(p.cur) > 0 {
			return true
		}
	}
	return false
}

// activeMembers returns the indices of the active services the pool holds.
func (m *model) activeMembers(p *pool) []int { return p.active }

// activeMissing returns the indices of the active services the pool has no workload of.
func (m *model) activeMissing(p *pool) []int {
	var idx []int
	for i, s := range m.svcs {
		if s.active() && !p.member[i] {
			idx = append(idx, i)
		}
	}
	return idx
}

func (m *model) spec(p *pool) []int64   { return p.spec }
func (m *model) target(p *pool) []int64 { return p.target }

// unlimited stands for "no availability floor" (retired services).
const unlimited = math.MaxInt64 / 4

func sum(v []int64) int64 {
	var t int64
	for _, x := range v {
		t += x
	}
	return t
}
