package dynamoview

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dgd-rollout/operator/render"
)

// FilterKind is the kind of a frontend's NamespaceFilter.
type FilterKind string

// Namespace filter kinds (lib/llm/src/namespace.rs, NamespaceFilter).
const (
	FilterGlobal FilterKind = "Global"
	FilterExact  FilterKind = "Exact"
	FilterPrefix FilterKind = "Prefix"
)

// NamespaceFilter is the frontend's Dynamo-namespace filter.
type NamespaceFilter struct {
	Kind  FilterKind
	Value string
}

// NewNamespaceFilter is NamespaceFilter::from_namespace_and_prefix
// (lib/llm/src/namespace.rs), with an empty prefix standing for "not set": a set prefix
// wins ("dynamo" → Global, else Prefix); otherwise a namespace of "" or "dynamo" is
// Global and any other is Exact.
func NewNamespaceFilter(namespace, prefix string) NamespaceFilter {
	switch {
	case prefix == GlobalNamespace:
		return NamespaceFilter{Kind: FilterGlobal}
	case prefix != "":
		return NamespaceFilter{Kind: FilterPrefix, Value: prefix}
	case namespace == "" || namespace == GlobalNamespace:
		return NamespaceFilter{Kind: FilterGlobal}
	}
	return NamespaceFilter{Kind: FilterExact, Value: namespace}
}

// Matches is NamespaceFilter::matches, the literal mode: Prefix(p) matches p and p-…
// (a "-" boundary, or p already ends with "-"), so "myns-dgd" does not match "myns-dgd2".
func (f NamespaceFilter) Matches(ns string) bool {
	switch f.Kind {
	case FilterExact:
		return ns == f.Value
	case FilterPrefix:
		rest, ok := strings.CutPrefix(ns, f.Value)
		return ok && (strings.HasSuffix(f.Value, "-") || rest == "" || strings.HasPrefix(rest, "-"))
	}
	return true
}

// MatchesWithPrefixMode is matches_with_prefix_mode (lib/llm/src/namespace.rs). In
// strict (WorkerGeneration) mode a Prefix(p) filter accepts only p, p-legacy and p-
// followed by exactly 8 lowercase hex characters; Exact and Global behave as Matches.
func (f NamespaceFilter) MatchesWithPrefixMode(ns string, strict bool) bool {
	if f.Kind != FilterPrefix || !strict {
		return f.Matches(ns)
	}
	return render.AcceptsNamespace(f.Value, ns, true)
}

// ReadinessUnit is one WorkerSet of a model in one Dynamo namespace
// (lib/llm/src/discovery/readiness.rs). An empty WorkerType is a legacy card.
type ReadinessUnit struct {
	WorkerType WorkerType
	LiveCount  int
	Needs      [][]WorkerType
}

// EvaluateReadiness is readiness.rs evaluate_readiness. Legacy rule: when a unit has no
// worker_type, ready iff some unit is live. Strict rule: present = types with a live
// unit; missing = registered types with no live unit, plus, for each live unit with
// needs of which no alternative lies within present, the absent types those needs name;
// ready = some unit live and nothing missing. No units at all is not ready.
func EvaluateReadiness(units []ReadinessUnit) (ready bool, missing []WorkerType) {
	live := false
	legacy := false
	present := map[WorkerType]bool{}
	for _, u := range units {
		if u.LiveCount > 0 {
			live = true
			present[u.WorkerType] = true
		}
		if u.WorkerType == "" {
			legacy = true
		}
	}
	if legacy {
		return live, nil
	}
	miss := map[string]bool{}
	for _, u := range units {
		if !present[u.WorkerType] {
			miss[string(u.WorkerType)] = true
		}
	}
	for _, u := range units {
		if u.LiveCount == 0 || len(u.Needs) == 0 {
			continue
		}
		satisfied := false
		for _, alt := range u.Needs {
			all := true
			for _, t := range alt {
				all = all && present[t]
			}
			if all {
				satisfied = true
				break
			}
		}
		if !satisfied {
			for _, alt := range u.Needs {
				for _, t := range alt {
					if !present[t] {
						miss[string(t)] = true
					}
				}
			}
		}
	}
	for _, t := range sortedKeys(miss) {
		missing = append(missing, WorkerType(t))
	}
	return live && len(missing) == 0, missing
}

// Generation is one Dynamo namespace a frontend admits.
type Generation struct {
	// Namespace is the Dynamo namespace (e.g. "<k8s-ns>-<dgd>-<hash8>").
	Namespace string
	// Workers counts live worker instances per worker type (legacy cards count as
	// Aggregated). Live means the instance has a model card and an Endpoint record for
	// the same namespace/component/endpoint.
	Workers map[WorkerType]int
	// Models lists the display names served in the namespace, sorted.
	Models []string
	// ModelReady is the readiness of each model in this namespace and Missing the worker
	// types missing for any model.
	ModelReady map[string]bool
	Missing    []WorkerType
	// Ready is true when the namespace holds a model and every model in it is ready.
	Ready bool
}

// FrontendView is what one frontend discovers in its Kubernetes namespace.
type FrontendView struct {
	K8sNamespace string
	Filter       NamespaceFilter
	Strict       bool
	// Generations lists every Dynamo namespace with a model card the filter admits,
	// sorted by namespace.
	Generations []Generation
	// Rejected lists the Dynamo namespaces with model cards the filter drops.
	Rejected []string
	// Dropped lists model cards whose card_json does not decode.
	Dropped []string
}

// ReadyGenerations returns the generations a request can be routed to.
func (f FrontendView) ReadyGenerations() []Generation {
	var out []Generation
	for _, g := range f.Generations {
		if g.Ready {
			out = append(out, g)
		}
	}
	return out
}

// Generation returns the generation of a Dynamo namespace, if admitted.
func (f FrontendView) Generation(ns string) (Generation, bool) {
	for _, g := range f.Generations {
		if g.Namespace == ns {
			return g, true
		}
	}
	return Generation{}, false
}

// Frontend computes what a frontend in k8sNamespace with DYN_NAMESPACE_PREFIX=prefix
// (empty: no prefix, so Global) and DYN_NAMESPACE_PREFIX_STRICT=strict discovers.
func (v View) Frontend(k8sNamespace, prefix string, strict bool) FrontendView {
	return v.frontend(k8sNamespace, NewNamespaceFilter("", prefix), strict)
}

// FrontendFor computes what the frontend runtime rt (see Frontends) discovers, using
// its DYN_NAMESPACE, DYN_NAMESPACE_PREFIX and strict mode.
func (v View) FrontendFor(rt Runtime) FrontendView {
	return v.frontend(rt.PodNamespace, NewNamespaceFilter(rt.Namespace, rt.Prefix), rt.Strict)
}

type unitKey struct {
	model, component, endpoint string
	workerType                 WorkerType
}

type unitAcc struct {
	needs [][]WorkerType
	ids   map[uint64]bool // ids with a card in this unit
}

// frontend groups the visible model cards the filter admits by Dynamo namespace
// (ModelWatcher::normalize, watcher.rs) into WorkerSets keyed by model, component,
// endpoint and effective worker type, and evaluates each model's readiness per namespace
// (Model::evaluate_namespace). A legacy prefill card (model_type naming Prefill, no
// worker_type) becomes Prefill needing [[Decode]] (normalize_legacy_prefill_topology).
// The incumbent-checksum rule (mdcsum) is not modelled.
func (v View) frontend(k8sNamespace string, filter NamespaceFilter, strict bool) FrontendView {
	fv := FrontendView{K8sNamespace: k8sNamespace, Filter: filter, Strict: strict}
	insts := v.Instances(k8sNamespace)
	// endpoint instances per ns/component/endpoint, across all visible pods.
	eps := map[string]map[uint64]bool{}
	for _, in := range insts {
		for _, e := range in.Metadata.Endpoints {
			k := e.Namespace + "/" + e.Component + "/" + e.Endpoint
			if eps[k] == nil {
				eps[k] = map[uint64]bool{}
			}
			eps[k][e.InstanceID] = true
		}
	}
	units := map[string]map[unitKey]*unitAcc{}
	rejected := map[string]bool{}
	for _, in := range insts {
		for _, key := range sortedKeys(in.Metadata.ModelCards) {
			m := in.Metadata.ModelCards[key]
			if !filter.MatchesWithPrefixMode(m.Namespace, strict) {
				rejected[m.Namespace] = true
				continue
			}
			card, err := m.Card()
			if err != nil {
				fv.Dropped = append(fv.Dropped, fmt.Sprintf("%s: %s: %v", in.PodName, key, err))
				continue
			}
			wt, needs := card.WorkerType, card.Needs
			if wt == "" && strings.Contains(string(card.ModelType), "Prefill") {
				wt = WorkerPrefill
				if len(needs) == 0 {
					needs = [][]WorkerType{{WorkerDecode}}
				}
			}
			uk := unitKey{card.DisplayName, m.Component, m.Endpoint, wt}
			if units[m.Namespace] == nil {
				units[m.Namespace] = map[unitKey]*unitAcc{}
			}
			acc := units[m.Namespace][uk]
			if acc == nil {
				acc = &unitAcc{needs: needs, ids: map[uint64]bool{}}
				units[m.Namespace][uk] = acc
			}
			acc.ids[m.InstanceID] = true
		}
	}
	for _, ns := range sortedKeys(units) {
		g := Generation{Namespace: ns, Workers: map[WorkerType]int{}, ModelReady: map[string]bool{}}
		perModel := map[string][]ReadinessUnit{}
		liveByType := map[WorkerType]map[uint64]bool{}
		for uk, acc := range units[ns] {
			live := 0
			for id := range acc.ids {
				if eps[ns+"/"+uk.component+"/"+uk.endpoint][id] {
					live++
					bucket := uk.workerType
					if bucket == "" {
						bucket = WorkerAggregated
					}
					if liveByType[bucket] == nil {
						liveByType[bucket] = map[uint64]bool{}
					}
					liveByType[bucket][id] = true
				}
			}
			perModel[uk.model] = append(perModel[uk.model], ReadinessUnit{WorkerType: uk.workerType, LiveCount: live, Needs: acc.needs})
		}
		for t, ids := range liveByType {
			g.Workers[t] = len(ids)
		}
		missing := map[string]bool{}
		g.Ready = len(perModel) > 0
		for _, model := range sortedKeys(perModel) {
			ready, miss := EvaluateReadiness(perModel[model])
			g.Models = append(g.Models, model)
			g.ModelReady[model] = ready
			g.Ready = g.Ready && ready
			for _, t := range miss {
				missing[string(t)] = true
			}
		}
		for _, t := range sortedKeys(missing) {
			g.Missing = append(g.Missing, WorkerType(t))
		}
		fv.Generations = append(fv.Generations, g)
	}
	fv.Rejected = sortedKeys(rejected)
	sort.Strings(fv.Dropped)
	return fv
}
