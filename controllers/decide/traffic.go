package decide

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/planner"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/traffic"
)

// Traffic between cohorts (TRAFFIC.md). In cohort form each frontend service's client
// traffic is split between the cohorts that have its frontends, by weight, through a
// traffic provider (package traffic: the proxy, or a Gateway API HTTPRoute). The split
// is decided here and only here, from the state the pass leaves (the planner's
// targets applied to what was observed):
//
//   - a cohort takes traffic only when it is routable: a ready frontend of every
//     frontend service and a replica Dynamo routes to of every worker service of its
//     revision (both roles of a disaggregated pool);
//   - by default each routable cohort's weight is its share of routable worker
//     capacity (DEP 4.3): its bottleneck service's ready replicas over the service's
//     desired count, normalised, in whole percents summing to 100;
//   - a setWeight step asks that share for the update revision's cohort once its
//     capacity reaches it (until then the capacity share, and the step waits); an
//     aborted rollout puts 100 on the stable cohort as soon as it is routable;
//   - a setHeaderRoute step sends the step's header to the update revision's cohort.
//
// A cohort the plan drains goes only once its weight 0 is in effect and its requests
// in flight are done (the proxy reports them; through a Gateway, drainSeconds pass):
// until then the pass holds every worker write and only moves the weights. The
// frontend's Service `{dgd}-{frontend}` selects the provider's entry (the proxy's pods)
// once the provider serves, and every frontend pod (each discovers only its cohort)
// otherwise, so the stable entry point always has a ready backend.

// defaultProxyDrainTimeout and defaultGatewayDrain are spec.rollout.trafficRouting's
// defaults (api/v1alpha1/traffic_types.go).
const (
	defaultProxyDrainTimeout = 3600 * time.Second
	defaultGatewayDrain      = 30 * time.Second
)

// cohortState is one cohort as the pass leaves it.
type cohortState struct {
	hash   string
	number int64
	// frontReady and frontReplicas count its frontends, over every frontend service.
	frontReady, frontReplicas int32
	// frontLive: every frontend service has a live frontend workload in the cohort.
	frontLive bool
	// routableWorkers counts its worker replicas Dynamo routes to.
	routableWorkers int32
	routable        bool
	// capacity is its bottleneck worker service's ready replicas over the service's
	// desired count.
	capacity float64
}

// front is one frontend service's traffic this pass.
type front struct {
	service  string
	provider traffic.Provider
	t        traffic.Traffic
	effect   traffic.Effect
	// local is the selector of the cohort the frontend's Service sends in-cluster
	// clients to while the provider does not own that Service (localCohort): the
	// cohort Service's, nil when no cohort is routable.
	local map[string]string
}

// trafficPlan is the pass's traffic: each frontend's split, the cohorts, and why the
// workers hold for it.
type trafficPlan struct {
	fronts  []front
	cohorts []cohortState
	// hold says why the workers hold ("" when they do not); waiting says why a
	// setWeight step waits for capacity.
	hold, waiting string
	requeue       time.Duration
	// draining are the cohorts whose weight 0 is in effect while they go, and since
	// when (status.cohorts[].drainingSince).
	draining map[string]time.Time
}

// afterPass is the replicas and ready replicas of every (service, revision) once the
// plan's targets are applied: ready counted up to the target, new replicas unready.
func afterPass(v *view, c course, plan planner.Plan) map[backends.Key][2]int32 {
	out := map[backends.Key][2]int32{}
	for _, w := range v.workers() {
		if w.Terminating {
			continue
		}
		t := v.targetOf(c.h, plan, w)
		cur := out[w.Key]
		out[w.Key] = [2]int32{cur[0] + t, cur[1] + min(w.Ready, t)}
	}
	goal := c.h.goalHash()
	for _, name := range c.rolledServices(v) {
		k := backends.Key{Service: name, Hash: goal}
		if _, ok := out[k]; !ok {
			out[k] = [2]int32{target(c.h, plan, k, 0), 0}
		}
	}
	return out
}

// cohortsAfter are the cohorts the pass leaves, newest first: every revision with a
// frontend or a worker replica after the pass.
func cohortsAfter(v *view, c course, after map[backends.Key][2]int32) []cohortState {
	byHash := map[string]*cohortState{}
	services := map[string]map[string]bool{} // hash -> its worker services
	for k, n := range after {
		if byHash[k.Hash] == nil {
			byHash[k.Hash] = &cohortState{hash: k.Hash, number: c.h.number(k.Hash), frontLive: true}
			services[k.Hash] = map[string]bool{}
		}
		if !v.form.isFrontend(k.Service) && n[0] > 0 {
			services[k.Hash][k.Service] = true
		}
	}
	for _, name := range c.goalDGD.WorkerServiceNames() {
		if c.goalDGD.Spec.Services[name].DesiredReplicas() > 0 && services[c.h.goalHash()] != nil {
			services[c.h.goalHash()][name] = true
		}
	}
	var out []cohortState
	for hash, cs := range byHash {
		cs.capacity = math.Inf(1)
		for _, fe := range v.form.frontends {
			n := after[backends.Key{Service: fe, Hash: hash}]
			cs.frontReplicas += n[0]
			cs.frontReady += n[1]
			cs.frontLive = cs.frontLive && n[0] > 0
		}
		workersReady := len(services[hash]) > 0
		for s := range services[hash] {
			n := after[backends.Key{Service: s, Hash: hash}]
			cs.routableWorkers += n[1]
			workersReady = workersReady && n[1] > 0
			r := float64(max(desiredOf(c.goalDGD, s), 1))
			cs.capacity = math.Min(cs.capacity, float64(n[1])/r)
		}
		if math.IsInf(cs.capacity, 1) {
			cs.capacity = 0
		}
		cs.routable = workersReady && cs.frontLive && frontsReady(v, after, hash)
		// A cohort the plan drains stays listed while its workloads run: it is asked no
		// weight, and its drain is followed (drainingSince) until it goes.
		if cs.frontReplicas > 0 || cs.routableWorkers > 0 || hasLiveFrontend(v, hash) {
			out = append(out, *cs)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].number > out[j].number })
	return out
}

// frontsReady: every frontend service has a ready frontend in the cohort.
func frontsReady(v *view, after map[backends.Key][2]int32, hash string) bool {
	for _, fe := range v.form.frontends {
		if after[backends.Key{Service: fe, Hash: hash}][1] == 0 {
			return false
		}
	}
	return true
}

// desiredOf is a service's desired replicas in dgd, 0 when it has none.
func desiredOf(dgd *v1alpha1.DynamoGraphDeployment, service string) int32 {
	if s := dgd.Spec.Services[service]; s != nil {
		return s.DesiredReplicas()
	}
	return 0
}

// weightsOf decides every cohort's weight (percent, summing to 100 over cohorts with a
// frontend) and, for a setWeight step, why it waits for capacity.
func weightsOf(v *view, c course, cohorts []cohortState) (map[string]int32, string) {
	shares := map[string]float64{}
	var routable []string
	for _, cs := range cohorts {
		if cs.routable {
			routable = append(routable, cs.hash)
			shares[cs.hash] = math.Max(cs.capacity, 1e-9)
		}
	}
	goal, canary := c.h.goalHash(), c.h.update.WorkerHash
	switch {
	case len(routable) == 0:
		// No cohort can serve: none is asked to (the proxy then serves nothing, and the
		// entry Service selects the frontend pods again: entrySelector).
		return fill(cohorts, nil), ""
	case c.aborted && contains(routable, goal):
		return whole(cohorts, goal), ""
	}
	if c.hold != nil && c.hold.Weight != nil && !c.aborted {
		want := float64(*c.hold.Weight) / 100
		total := 0.0
		for _, s := range shares {
			total += s
		}
		have := shares[canary] / math.Max(total, 1e-9)
		if contains(routable, canary) && have+1e-9 >= want {
			return withShare(cohorts, shares, canary, *c.hold.Weight), ""
		}
		capped := percents(cohorts, shares)
		waiting := fmt.Sprintf("setWeight %d%%: revision %d's cohort has %.0f%% of the ready capacity", *c.hold.Weight, c.h.update.Number, 100*have)
		if capped[canary] > *c.hold.Weight {
			return withShare(cohorts, shares, canary, *c.hold.Weight), waiting
		}
		return capped, waiting
	}
	return percents(cohorts, shares), ""
}

// whole puts 100 on hash and 0 on every other cohort.
func whole(cohorts []cohortState, hash string) map[string]int32 {
	return fill(cohorts, map[string]int32{hash: 100})
}

// fill gives every cohort with a frontend an entry (0 unless set).
func fill(cohorts []cohortState, w map[string]int32) map[string]int32 {
	out := map[string]int32{}
	for _, cs := range cohorts {
		if cs.frontLive || w[cs.hash] > 0 {
			out[cs.hash] = w[cs.hash]
		}
	}
	return out
}

// withShare puts n on hash and shares 100 - n over the others by their shares.
func withShare(cohorts []cohortState, shares map[string]float64, hash string, n int32) map[string]int32 {
	rest := map[string]float64{}
	for h, s := range shares {
		if h != hash {
			rest[h] = s
		}
	}
	if len(rest) == 0 {
		return whole(cohorts, hash)
	}
	out := splitTotal(rest, 100-n)
	out[hash] = n
	return fill(cohorts, out)
}

// percents turns shares into whole percents summing to 100 (largest remainder, ties
// to the lower hash), every other cohort with a frontend at 0.
func percents(cohorts []cohortState, shares map[string]float64) map[string]int32 {
	return fill(cohorts, splitTotal(shares, 100))
}

// splitTotal splits total in proportion to shares, in whole numbers summing to total.
func splitTotal(shares map[string]float64, total int32) map[string]int32 {
	sum := 0.0
	keys := make([]string, 0, len(shares))
	for k, s := range shares {
		sum += s
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := map[string]int32{}
	if sum <= 0 || len(keys) == 0 {
		return out
	}
	type rem struct {
		key  string
		frac float64
	}
	var rems []rem
	var given int32
	for _, k := range keys {
		exact := float64(total) * shares[k] / sum
		out[k] = int32(math.Floor(exact))
		given += out[k]
		rems = append(rems, rem{k, exact - math.Floor(exact)})
	}
	sort.SliceStable(rems, func(i, j int) bool { return rems[i].frac > rems[j].frac })
	for i := 0; given < total; i++ {
		out[rems[i%len(rems)].key]++
		given++
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// providerFor is the traffic provider spec.rollout.trafficRouting selects: the Gateway
// API's when set, else the proxy.
func providerFor(v *view) (traffic.Provider, string) {
	kind := v1alpha1.TrafficProxy
	if tr := v.dgd.RolloutOrDefault().TrafficRouting; tr != nil && tr.GatewayAPI != nil {
		kind = v1alpha1.TrafficGatewayAPI
	}
	return v.Providers[kind], kind
}

// trafficSpec is spec.rollout.trafficRouting, the proxy when unset.
func trafficSpec(dgd *v1alpha1.DynamoGraphDeployment) v1alpha1.TrafficRouting {
	if tr := dgd.RolloutOrDefault().TrafficRouting; tr != nil {
		return *tr.DeepCopy()
	}
	return v1alpha1.TrafficRouting{Proxy: &v1alpha1.ProxyRouting{}}
}

// EntryName is the frontend service's stable Service, `{dgd}-{service}`.
func EntryName(dgd *v1alpha1.DynamoGraphDeployment, service string) string {
	return render.ServiceName(dgd.Name, service, "", backends.WorkloadName)
}

// TrafficBase is the Traffic of one frontend service with no cohorts: what a provider
// names its objects and lookups from (observe reads them before anything is decided).
func TrafficBase(dgd *v1alpha1.DynamoGraphDeployment, service string, cfg traffic.Config) traffic.Traffic {
	return traffic.Traffic{DGD: dgd, Frontend: service, Entry: EntryName(dgd, service), Spec: trafficSpec(dgd), Config: cfg}
}

// decideTraffic decides the split of every frontend service from the state the plan
// leaves, and whether the workers hold for it (a cohort the plan drains that still has
// traffic in effect, or requests in flight).
func decideTraffic(v *view, c course, plan planner.Plan) (trafficPlan, error) {
	tp := trafficPlan{draining: map[string]time.Time{}}
	if !v.form.cohorts {
		return tp, nil
	}
	provider, kind := providerFor(v)
	if provider == nil {
		return tp, &invalidSpec{msg: fmt.Sprintf("spec.rollout.trafficRouting: the %s traffic provider is not available in this operator (for gatewayAPI, the Gateway API CRDs must be installed)", kind)}
	}
	after := afterPass(v, c, plan)
	tp.cohorts = cohortsAfter(v, c, after)
	weights, waiting := weightsOf(v, c, tp.cohorts)
	tp.waiting = waiting
	var header *traffic.HeaderRoute
	if c.hold != nil && c.hold.Header != nil && !c.aborted {
		for _, cs := range tp.cohorts {
			if cs.hash == c.h.update.WorkerHash && cs.routable {
				header = &traffic.HeaderRoute{Name: c.hold.Header.Name, Value: c.hold.Header.Value, Hash: cs.hash}
			}
		}
	}
	for _, fe := range v.form.frontends {
		t := TrafficBase(v.dgd, fe, v.TrafficConfig)
		t.HeaderRoute = header
		for _, cs := range tp.cohorts {
			w, ok := weights[cs.hash]
			if !ok {
				continue
			}
			name := backends.CohortServiceName(v.dgd.Name, fe, cs.hash)
			t.Cohorts = append(t.Cohorts, traffic.Cohort{Hash: cs.hash, Service: name, Address: v.clusterIP(name), Port: render.PortHTTP, Weight: w})
		}
		t.Cohorts = traffic.Sorted(t.Cohorts)
		obs := v.Traffic[fe]
		obs.Now = v.Now
		f := front{service: fe, provider: provider, t: t, effect: provider.Effect(t, obs)}
		if hash := localCohort(v, f, tp.cohorts); hash != "" {
			if spec := c.h.templateOf(v.dgd, fe, hash); spec != nil {
				cc := render.Component{DGD: v.dgd, Name: fe, Spec: spec, Hash: hash, Config: v.Platform}
				f.local = cc.Service(backends.CohortServiceName(v.dgd.Name, fe, hash), false).Spec.Selector
			}
		}
		tp.fronts = append(tp.fronts, f)
	}
	drainHold(v, c, plan, &tp)
	return tp, nil
}

// clusterIP is the cluster IP of the DGD's Service of that name, "" while it has none.
func (v *view) clusterIP(name string) string {
	for i := range v.Objects.Services {
		if s := &v.Objects.Services[i]; s.Name == name && s.Spec.ClusterIP != "None" {
			return s.Spec.ClusterIP
		}
	}
	return ""
}

// drainHold holds the workers while a cohort the plan drains still takes traffic: its
// weight 0 not yet in effect everywhere, requests still in flight through the proxy
// (up to drainTimeoutSeconds), or, through a Gateway, drainSeconds not yet passed.
func drainHold(v *view, c course, plan planner.Plan, tp *trafficPlan) {
	goal := c.h.goalHash()
	drained := map[string]bool{}
	for _, w := range v.workers() {
		if w.Terminating || w.Hash == goal {
			continue
		}
		d, seen := drained[w.Hash]
		drained[w.Hash] = (d || !seen) && v.targetOf(c.h, plan, w) == 0
	}
	var why []string
	if c.aborted {
		// An abort puts 100% back on the stable cohort first: no other cohort loses a
		// replica before its weight 0 is in effect.
		for _, hash := range shrunk(v, c, plan) {
			if msg := weightZeroInEffect(c, tp, hash); msg != "" {
				why = append(why, msg)
			}
		}
	}
	for _, hash := range sortedKeys(drained) {
		if !drained[hash] || !hasLiveFrontend(v, hash) {
			continue
		}
		if msg, left := cohortDrained(v, c, tp, hash); msg != "" {
			why = append(why, msg)
			if left > 0 {
				tp.requeue = soonest(tp.requeue, left)
			}
		}
	}
	if len(why) > 0 {
		tp.hold = strings.Join(why, "; ")
	}
}

// shrunk are the revisions other than the goal whose replicas the plan lowers and that
// have a live cohort frontend, sorted.
func shrunk(v *view, c course, plan planner.Plan) []string {
	seen := map[string]bool{}
	for _, w := range v.workers() {
		if !w.Terminating && w.Hash != c.h.goalHash() && v.targetOf(c.h, plan, w) < w.Replicas && hasLiveFrontend(v, w.Hash) {
			seen[w.Hash] = true
		}
	}
	return sortedKeys(seen)
}

// weightZeroInEffect says why cohort hash still takes traffic ("" once every provider
// has its weight 0 in effect).
func weightZeroInEffect(c course, tp *trafficPlan, hash string) string {
	for _, f := range tp.fronts {
		if !f.effect.InEffect || f.effect.Weights == nil || f.effect.Weights[hash] != 0 {
			return fmt.Sprintf("revision %d's cohort shrinks once its weight 0 is in effect (%s)", c.h.number(hash), orNone(f.effect.Message, f.t.Entry))
		}
	}
	return ""
}

// hasLiveFrontend reports whether revision hash has a live cohort frontend (a revision
// without one takes no traffic and drains as before).
func hasLiveFrontend(v *view, hash string) bool {
	for _, w := range v.Workloads {
		if w.Hash == hash && v.form.isFrontend(w.Service) && !w.Terminating {
			return true
		}
	}
	return false
}

// cohortDrained says why cohort hash may not go yet ("" once it may) and in how long a
// clock would let it.
func cohortDrained(v *view, c course, tp *trafficPlan, hash string) (string, time.Duration) {
	n := c.h.number(hash)
	since := v.Now
	for _, cs := range v.dgd.Status.Cohorts {
		if cs.Hash == hash && cs.DrainingSince != nil {
			since = cs.DrainingSince.Time
		}
	}
	if msg := weightZeroInEffect(c, tp, hash); msg != "" {
		return fmt.Sprintf("revision %d's cohort goes once its weight 0 is in effect (%s)", n, orNone(firstMessage(tp), tp.fronts[0].t.Entry)), 0
	}
	tp.draining[hash] = since
	spec := trafficSpec(v.dgd)
	for _, f := range tp.fronts {
		if !f.effect.InFlightKnown {
			wait := defaultGatewayDrain
			if spec.GatewayAPI != nil && spec.GatewayAPI.DrainSeconds != nil {
				wait = time.Duration(*spec.GatewayAPI.DrainSeconds) * time.Second
			}
			if left := since.Add(wait).Sub(v.Now); left > 0 {
				return fmt.Sprintf("revision %d's cohort drains for %s through the Gateway", n, wait), left + 100*time.Millisecond
			}
			continue
		}
		if inflight := f.effect.InFlight[hash]; inflight > 0 {
			limit := defaultProxyDrainTimeout
			if spec.Proxy != nil && spec.Proxy.DrainTimeoutSeconds != nil {
				limit = time.Duration(*spec.Proxy.DrainTimeoutSeconds) * time.Second
			}
			if left := since.Add(limit).Sub(v.Now); left > 0 {
				return fmt.Sprintf("revision %d's cohort drains: %d requests in flight through %s", n, inflight, f.t.Entry), left + 100*time.Millisecond
			}
		}
	}
	return "", 0
}

// firstMessage is the first provider's Effect message that says something, or "".
func firstMessage(tp *trafficPlan) string {
	for _, f := range tp.fronts {
		if f.effect.Message != "" {
			return f.effect.Message
		}
	}
	return ""
}

func orNone(msg, entry string) string {
	if msg == "" {
		return "waiting for " + entry
	}
	return msg
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// writeTraffic decides the writes of the providers' objects: each frontend's rendered
// objects applied (created, or updated when they differ), those to create once created
// when missing, and the objects of a provider the DGD no longer routes through deleted
// once nothing routes through them.
func writeTraffic(v *view, tp trafficPlan, d *draft) error {
	if v.form.unservable != "" {
		// Nothing the provider renders can serve (a parent Gateway that does not exist),
		// and the pass holds every cohort as it is: its objects are left as they are,
		// none made, none pruned, until it can.
		return nil
	}
	wanted := map[string]map[string]bool{} // frontend -> object keys rendered
	for _, f := range tp.fronts {
		r, err := f.provider.Objects(f.t)
		if err != nil {
			return fmt.Errorf("rendering the traffic of %s/%s's %s: %w", v.dgd.Namespace, v.dgd.Name, f.service, err)
		}
		obs := v.Traffic[f.service].Objects
		wanted[f.service] = map[string]bool{}
		same := sameObject
		if c, ok := f.provider.(traffic.Comparer); ok {
			same = func(have, want client.Object) bool {
				if s, known := c.Same(have, want); known {
					return s
				}
				return sameObject(have, want)
			}
		}
		for _, o := range r.Apply {
			key := lookupKeyOf(v.dgd, o)
			wanted[f.service][key] = true
			stampTemplate(o)
			apply(v.dgd, d, o, obs[key], true, same)
		}
		for _, o := range r.Create {
			key := lookupKeyOf(v.dgd, o)
			wanted[f.service][key] = true
			if obs[key] == nil {
				owned(v.dgd, o, true)
				d.write(Write{Op: CreateObject, Object: o, Kind: kindOf(o), Controller: true,
					Say: []string{fmt.Sprintf("created %s %s", kindOf(o), o.GetName())}})
			}
		}
	}
	pruneTraffic(v, wanted, d)
	return nil
}

// pruneTraffic deletes the DGD's traffic objects no frontend's split wants, once the
// frontend's Service no longer selects them (its selector, as cached, is not the
// provider's entry), so no client is still sent to them.
func pruneTraffic(v *view, wanted map[string]map[string]bool, d *draft) {
	lookups := TrafficLookups(v.dgd, v.Providers, v.TrafficConfig)
	for _, fe := range sortedKeys(v.Traffic) {
		if wanted[fe] == nil && !entryDirect(v, fe) {
			continue // clients still reach the provider: it stays until they do not
		}
		obs := v.Traffic[fe].Objects
		for _, key := range sortedKeys(obs) {
			o := obs[key]
			if _, ours := lookups[fe].Objects[key]; !ours || wanted[fe][key] || o == nil || !isControlledBy(o, v.dgd) || !o.GetDeletionTimestamp().IsZero() {
				continue
			}
			d.write(Write{Op: DeleteObject, Object: o, Kind: kindOf(o), Say: []string{fmt.Sprintf("deleted %s %s", kindOf(o), o.GetName())}})
		}
	}
}

// entryDirect reports whether the frontend's Service, as cached, selects the
// frontend's pods (not a provider's): a shared frontend's selector.
func entryDirect(v *view, service string) bool {
	name := EntryName(v.dgd, service)
	for i := range v.Objects.Services {
		s := &v.Objects.Services[i]
		if s.Name == name {
			return s.Spec.Selector[v1alpha1.LabelService] != "" && s.Spec.Selector[v1alpha1.LabelComponentType] != ""
		}
	}
	return true // none: nothing reaches a provider through it
}

// notServing says why the workers hold because the traffic provider routes nothing
// while some cohort could take traffic ("" when it serves, or when no cohort can yet: a
// first deploy makes its workers first): a parent Gateway that does not exist or has
// not accepted the route, a proxy with no ready replica that applied a split. Nothing
// that runs is touched until it serves, as a rollout through a provider that routes
// nothing would move capacity no client reaches.
func (tp trafficPlan) notServing() string {
	routable := false
	for _, cs := range tp.cohorts {
		routable = routable || cs.routable
	}
	if !routable {
		return ""
	}
	for _, f := range tp.fronts {
		if !f.effect.Serving {
			return fmt.Sprintf("the cohorts' traffic through %s is not served: %s", f.t.Entry, orNone(f.effect.Message, f.t.Entry))
		}
	}
	return ""
}

// unservable says why the cohorts' traffic cannot be served whatever this pass writes
// (the provider's Effect.Unservable for some frontend service: a parent Gateway that
// does not exist), or "": only in cohort form, and only while something of the DGD
// runs (a new DGD deploys, and says it is not served).
func unservable(v *view) string {
	if !v.form.cohorts || !v.runsAny() {
		return ""
	}
	provider, _ := providerFor(v)
	if provider == nil {
		return "" // decideTraffic stops the DGD with InvalidSpec
	}
	var out []string
	for _, fe := range v.form.frontends {
		t := TrafficBase(v.dgd, fe, v.TrafficConfig)
		obs := v.Traffic[fe]
		obs.Now = v.Now
		if u := provider.Effect(t, obs).Unservable; u != "" {
			out = append(out, fmt.Sprintf("the cohorts' traffic through %s cannot be served: %s", t.Entry, u))
		}
	}
	return strings.Join(out, "; ")
}

// runsAny reports whether some workload of the DGD is live.
func (v *view) runsAny() bool {
	for _, w := range v.Workloads {
		if !w.Terminating {
			return true
		}
	}
	return false
}

// entrySelector is the selector of the frontend's Service this pass: the provider's
// entry once it serves a split (the proxy's pods), else one routable cohort's frontend
// pods (localCohort: a Gateway routes through its HTTPRoute, in-cluster clients through
// this Service, and before the proxy serves every client does), else nil: the
// frontend's pods (no cohort is routable, so none can be preferred).
func (tp trafficPlan) entrySelector(service string) map[string]string {
	for _, f := range tp.fronts {
		if f.service != service {
			continue
		}
		if f.effect.Serving {
			if sel := f.provider.EntrySelector(f.t); sel != nil {
				return sel
			}
		}
		return f.local
	}
	return nil
}

// localCohort is the cohort the frontend's Service sends in-cluster clients to while
// the provider does not own it: a Service selects by equality, so it can spread over
// one cohort's frontends, not split by weight. Of the routable cohorts with a weight,
// the one with the most weight in effect (the weights asked while none is known); a
// tie keeps the cohort the Service selects now, then the older revision. A cohort
// whose pool Dynamo cannot route to never takes a client this way, and a cohort
// drained to weight 0 loses them with its weight. "" when no cohort is routable.
func localCohort(v *view, f front, cohorts []cohortState) string {
	now := ""
	for i := range v.Objects.Services {
		if s := &v.Objects.Services[i]; s.Name == f.t.Entry {
			now = s.Spec.Selector[v1alpha1.LabelWorkerHash]
		}
	}
	weights := f.effect.Weights
	if weights == nil {
		weights = f.t.Weights()
	}
	best, bestWeight, bestNumber := "", int32(-1), int64(0)
	for _, cs := range cohorts {
		w, ok := weights[cs.hash]
		if !cs.routable || !ok {
			continue
		}
		better := w > bestWeight ||
			w == bestWeight && best != now && (cs.hash == now || cs.number < bestNumber)
		if better {
			best, bestWeight, bestNumber = cs.hash, w, cs.number
		}
	}
	if bestWeight <= 0 && len(weights) > 1 {
		// every routable cohort at weight 0 in effect: the one the split is moving to
		for _, c := range f.t.Cohorts {
			for _, cs := range cohorts {
				if cs.hash == c.Hash && cs.routable && c.Weight > bestWeight {
					best, bestWeight = c.Hash, c.Weight
				}
			}
		}
	}
	return best
}

// cohortStatuses are status.cohorts and status.traffic as the pass leaves them, and the
// Events of the weights it changes.
func cohortStatuses(v *view, tp trafficPlan, res []Workload, d *draft) ([]v1alpha1.CohortStatus, *v1alpha1.TrafficStatus) {
	if len(tp.fronts) == 0 {
		return nil, nil
	}
	left := map[string]bool{} // the revisions with a workload the pass leaves
	for _, w := range res {
		if !w.Terminating {
			left[w.Hash] = true
		}
	}
	var out []v1alpha1.CohortStatus
	prev := map[string]v1alpha1.CohortStatus{}
	for _, cs := range v.dgd.Status.Cohorts {
		prev[cs.Hash] = cs
	}
	var changed []string
	for _, cs := range tp.cohorts {
		if !left[cs.hash] {
			continue // the pass deletes its last workload: the cohort is gone
		}
		st := v1alpha1.CohortStatus{Revision: cs.number, Hash: cs.hash, Namespace: backends.EffectiveNamespace(v.dgd, true, cs.hash),
			FrontendReplicas: cs.frontReplicas, FrontendReadyReplicas: cs.frontReady, RoutableWorkers: cs.routableWorkers, Routable: cs.routable}
		for _, f := range tp.fronts {
			st.Services = append(st.Services, backends.CohortServiceName(v.dgd.Name, f.service, cs.hash))
			for _, c := range f.t.Cohorts {
				if c.Hash == cs.hash {
					st.Weight = c.Weight
				}
			}
			if f.effect.Weights != nil {
				st.WeightInEffect = ptr.To(f.effect.Weights[cs.hash])
			}
			if f.effect.InFlightKnown {
				st.InFlight = ptr.To(f.effect.InFlight[cs.hash])
			}
			st.HeaderRoute = st.HeaderRoute || (f.t.HeaderRoute != nil && f.t.HeaderRoute.Hash == cs.hash)
		}
		if since, ok := tp.draining[cs.hash]; ok {
			st.DrainingSince = ptrTime(since)
		}
		if p, ok := prev[cs.hash]; !ok || p.Weight != st.Weight {
			changed = append(changed, fmt.Sprintf("revision %d %d%%", cs.number, st.Weight))
		}
		out = append(out, st)
	}
	if len(changed) > 0 && len(out) > 0 {
		d.event("Normal", v1alpha1.EventTrafficShifted, "traffic asked: "+strings.Join(changed, ", "))
	}
	ts := &v1alpha1.TrafficStatus{Provider: tp.fronts[0].provider.Kind(), InEffect: true}
	var msgs []string
	for _, f := range tp.fronts {
		ts.Entry = append(ts.Entry, f.t.Entry)
		if !f.effect.InEffect {
			ts.InEffect = false
			msgs = append(msgs, orNone(f.effect.Message, f.t.Entry))
		}
	}
	ts.Message = strings.Join(msgs, "; ")
	return out, ts
}

// isControlledBy reports whether the DGD controls o.
func isControlledBy(o client.Object, dgd *v1alpha1.DynamoGraphDeployment) bool {
	for _, r := range o.GetOwnerReferences() {
		if r.UID == dgd.UID && r.Controller != nil && *r.Controller {
			return true
		}
	}
	return false
}

// TrafficLookup is what observe reads for one frontend service's providers: every
// object any provider renders or looks up for it (empty objects of their kind with
// their namespace and name, by traffic.Key), and the label sets of their pods.
type TrafficLookup struct {
	Objects map[string]client.Object
	Pods    []map[string]string
}

// TrafficLookups are the objects and pods observe reads for each frontend service of
// dgd (a pure function of the spec): those of every provider, the one in use and those
// whose objects a pass may still have to delete.
func TrafficLookups(dgd *v1alpha1.DynamoGraphDeployment, providers map[string]traffic.Provider, cfg traffic.Config) map[string]TrafficLookup {
	out := map[string]TrafficLookup{}
	for _, fe := range frontendsOf(dgd) {
		base := TrafficBase(dgd, fe, cfg)
		l := TrafficLookup{Objects: map[string]client.Object{}}
		for _, kind := range sortedKeys(providers) {
			p := providers[kind]
			if r, err := p.Objects(base); err == nil {
				for _, o := range append(append([]client.Object(nil), r.Apply...), r.Create...) {
					l.Objects[lookupKeyOf(dgd, o)] = emptyLike(o)
				}
			}
			for _, o := range p.Lookups(base) {
				l.Objects[lookupKeyOf(dgd, o)] = emptyLike(o)
			}
			if sel := p.PodLabels(base); sel != nil {
				l.Pods = append(l.Pods, sel)
			}
		}
		out[fe] = l
	}
	return out
}

// lookupKeyOf is o's key in traffic.Observed.Objects: traffic.Key of its kind and
// name, with its namespace in between when it is not the DGD's (a parent Gateway of
// another namespace), so that two objects of one name never share a key.
func lookupKeyOf(dgd *v1alpha1.DynamoGraphDeployment, o client.Object) string {
	if ns := o.GetNamespace(); ns != "" && ns != dgd.Namespace {
		return traffic.Key(kindOf(o), ns+"/"+o.GetName())
	}
	return traffic.Key(kindOf(o), o.GetName())
}

// emptyLike is an empty object of o's type with its namespace and name.
func emptyLike(o client.Object) client.Object {
	e := reflect.New(reflect.TypeOf(o).Elem()).Interface().(client.Object)
	e.SetName(o.GetName())
	e.SetNamespace(o.GetNamespace())
	return e
}
