package agent

import (
	"net/http"
	"sync/atomic"
	"time"
)

// health serves the agent's probes, read-only: nothing on this port changes HAProxy
// (its runtime API is on the UNIX socket alone).
//   - /startz: haproxy.cfg is written (the native sidecar's startup probe: HAProxy
//     starts only after it passes, so it starts on the current split);
//   - /readyz: the newest split the agent read is what HAProxy holds;
//   - /healthz: the agent's loop ran within stale.
type health struct {
	started, ready atomic.Bool
	last           atomic.Int64 // the loop's last beat, Unix nanoseconds
	stale          time.Duration
}

func (h *health) start()           { h.started.Store(true) }
func (h *health) setReady(ok bool) { h.ready.Store(ok) }
func (h *health) beat()            { h.last.Store(time.Now().UnixNano()) }
func (h *health) alive() bool      { return time.Since(time.Unix(0, h.last.Load())) < h.stale }

// ServeHTTP answers GET and HEAD of the three paths: 200 "ok" or 503.
func (h *health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var ok bool
	switch r.URL.Path {
	case "/startz":
		ok = h.started.Load()
	case "/readyz":
		ok = h.ready.Load()
	case "/healthz":
		ok = h.alive()
	default:
		http.NotFound(w, r)
		return
	}
	if !ok {
		http.Error(w, "not yet", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}
