package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// PassRecorder wraps one controller's API transport and records its LeaderWorkerSet
// writes (create, spec.replicas patch or update, delete), each tagged with the number
// of reconciles the controller (by name, in this process's controller-runtime metrics
// registry) had completed when the request started. A controller-runtime controller
// with one worker runs one reconcile at a time and every write of a reconcile starts
// before that reconcile completes, so writes with the same tag are one pass, exactly:
// the state after a pass's last write is what that pass set. This works for any
// in-process controller, ours or not.
type PassRecorder struct {
	Controller string

	mu     sync.Mutex
	on     bool
	writes []lwsWrite
}

type lwsWrite struct {
	pass     float64
	at       time.Time
	name     string
	replicas *int32 // nil: the write did not set spec.replicas
	labels   map[string]string
	deleted  bool
}

// Wrap is a rest.Config WrapTransport.
func (p *PassRecorder) Wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		p.mu.Lock()
		on := p.on
		p.mu.Unlock()
		if !on || r.Method == http.MethodGet || !strings.Contains(r.URL.Path, "/leaderworkersets") ||
			strings.HasSuffix(r.URL.Path, "/status") {
			return next.RoundTrip(r)
		}
		w := lwsWrite{pass: reconciles(p.Controller), at: time.Now()}
		var body []byte
		if r.GetBody != nil {
			if rc, err := r.GetBody(); err == nil {
				body, _ = io.ReadAll(rc)
				_ = rc.Close()
			}
		}
		var obj struct {
			Metadata struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				Replicas *int32 `json:"replicas"`
			} `json:"spec"`
		}
		_ = json.NewDecoder(bytes.NewReader(body)).Decode(&obj)
		switch r.Method {
		case http.MethodPost:
			w.name, w.labels = obj.Metadata.Name, obj.Metadata.Labels
			if obj.Spec.Replicas == nil {
				one := int32(1)
				obj.Spec.Replicas = &one
			}
		case http.MethodDelete:
			w.deleted = true
			w.name = path.Base(r.URL.Path)
		case http.MethodPut:
			// A scale is a PUT of the /scale subresource: an autoscaling/v1 Scale whose
			// spec.replicas is the count, the LeaderWorkerSet named one segment up.
			w.name = path.Base(strings.TrimSuffix(r.URL.Path, "/scale"))
		default:
			w.name = path.Base(r.URL.Path)
		}
		w.replicas = obj.Spec.Replicas
		resp, err := next.RoundTrip(r)
		if err == nil && resp.StatusCode < 300 {
			p.mu.Lock()
			if p.on {
				p.writes = append(p.writes, w)
			}
			p.mu.Unlock()
		}
		return resp, err
	})
}

// Start clears and starts recording; Stop stops it.
func (p *PassRecorder) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on, p.writes = true, nil
}

func (p *PassRecorder) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on = false
}

// PassResult is the LeaderWorkerSet replica state one pass left behind.
type PassResult struct {
	At     time.Duration // the pass's last write, from begin
	Writes int
	Pools  string
	Skew   float64
}

// Passes folds the recorded writes, pass by pass, onto the state the watcher saw at
// Begin, and returns the state after each pass that changed replicas.
func (p *PassRecorder) Passes(w *GangWatcher) []PassResult {
	p.mu.Lock()
	writes := append([]lwsWrite(nil), p.writes...)
	p.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	type lwsState struct {
		role, rev string
		replicas  int32
	}
	state := map[string]lwsState{}
	for name, s := range w.beginLWS {
		state[name] = lwsState{role: s.role, rev: s.rev, replicas: s.replicas}
	}
	var out []PassResult
	for i := 0; i < len(writes); {
		j, changed := i, false
		for ; j < len(writes) && writes[j].pass == writes[i].pass; j++ {
			wr := writes[j]
			cur, known := state[wr.name]
			switch {
			case wr.deleted:
				if known {
					delete(state, wr.name)
					changed = changed || cur.replicas != 0
				}
			case wr.labels != nil:
				role, rev, ok := w.classify(wr.labels)
				if ok {
					state[wr.name] = lwsState{role: role, rev: rev, replicas: *wr.replicas}
					changed = true
				}
			case wr.replicas != nil && known:
				changed = changed || cur.replicas != *wr.replicas
				cur.replicas = *wr.replicas
				state[wr.name] = cur
			}
		}
		if changed {
			spec := map[string]map[string]int32{}
			for _, s := range state {
				if spec[s.rev] == nil {
					spec[s.rev] = map[string]int32{}
				}
				spec[s.rev][s.role] += s.replicas
			}
			out = append(out, PassResult{At: writes[j-1].at.Sub(w.begin), Writes: j - i,
				Pools: w.describe(spec), Skew: w.skew(spec)})
		}
		i = j
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// reconciles is controller_runtime_reconcile_total of one controller (all results).
func reconciles(controller string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return -1
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

func (r PassResult) String() string {
	return fmt.Sprintf("%7.3fs  %-40s skew %.2f  (%d writes)", r.At.Seconds(), r.Pools, r.Skew, r.Writes)
}
