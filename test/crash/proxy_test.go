//go:build linux

package crash

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgd-rollout/operator/test/opproc"
)

// writeProxy sits between an operator process and the API server (opproc.ServeProxy:
// plain HTTP on 127.0.0.1, forwarding as the cluster admin) and sees every request.
// For each write (POST, PUT, PATCH, DELETE; Events and Leases excepted) it asks
// afterWrite whether to kill the operator once the API server has applied it: then it
// calls kill, which must SIGKILL the operator, before the response is sent, so the
// operator dies with exactly that write done and the next one not started — a
// deterministic crash point.
type writeProxy struct {
	kubeconfig string
	srv        *http.Server

	mu         sync.Mutex
	n          int
	last       string
	afterWrite func(n int, desc string) bool
	kill       func()
}

func startWriteProxy(t *testing.T, e *env) *writeProxy {
	t.Helper()
	p := &writeProxy{kubeconfig: filepath.Join(e.dir, fmt.Sprintf("proxy-%d.kubeconfig", time.Now().UnixNano()))}
	srv, err := opproc.ServeProxy(e.cl.Config, p.kubeconfig, p.handler)
	if err != nil {
		t.Fatal(err)
	}
	p.srv = srv
	t.Cleanup(func() { _ = p.srv.Close() })
	return p
}

func (p *writeProxy) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		write := r.Method != http.MethodGet && r.Method != http.MethodHead &&
			!strings.Contains(r.URL.Path, "/events") && !strings.Contains(r.URL.Path, "/leases")
		if !write {
			next.ServeHTTP(w, r)
			return
		}
		p.mu.Lock()
		p.n++
		n, desc := p.n, r.Method+" "+r.URL.Path
		p.last = desc
		hook, kill := p.afterWrite, p.kill
		p.mu.Unlock()
		if hook == nil || !hook(n, desc) {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r) // applied by the API server...
		kill()                 // ...and the operator dies before it hears so
		panic(http.ErrAbortHandler)
	})
}

// set installs the write hook and the kill function.
func (p *writeProxy) set(afterWrite func(n int, desc string) bool, kill func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.afterWrite, p.kill = afterWrite, kill
}

func (p *writeProxy) lastWrite() (int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n, p.last
}
