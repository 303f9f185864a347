package haproxy

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// apiProxy stands between the agents and the API server: it passes every request on
// with the caller's own credentials (the ServiceAccount token of its kubeconfig, so
// the API server authorizes the agent by the rendered Role), and, while failing, answers
// every request 503 and ends every watch it streams: an API server that is down. It
// serves TLS: client-go sends a kubeconfig's credentials only over TLS
// (k8s.io/client-go tools/clientcmd client_config.go, ClientConfig: "only try to read
// the auth information if we are secure").
type apiProxy struct {
	srv     *httptest.Server
	failing atomic.Bool
	// failed counts the requests answered 503.
	failed atomic.Int64
	mu     sync.Mutex
	open   map[*http.Request]context.CancelFunc
	// log is every request passed on.
	log []apiRequest
}

// apiRequest is one request an agent sent.
type apiRequest struct {
	at     time.Time
	method string
	query  url.Values
}

// patches counts the PATCH requests passed on since t.
func (p *apiProxy) patches(since time.Time) (n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.log {
		if r.method == http.MethodPatch && !r.at.Before(since) {
			n++
		}
	}
	return n
}

// requests counts the requests passed on since t.
func (p *apiProxy) requests(since time.Time) (n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.log {
		if !r.at.Before(since) {
			n++
		}
	}
	return n
}

func (e *env) startAPIProxy(tb testing.TB) *apiProxy {
	tb.Helper()
	target, err := url.Parse(e.config.Host)
	if err != nil {
		tb.Fatal(err)
	}
	// The API server's CA only: the caller's Authorization header is what authenticates.
	transport, err := rest.TransportFor(&rest.Config{Host: e.config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: e.config.CAData}})
	if err != nil {
		tb.Fatal(err)
	}
	p := &apiProxy{open: map[*http.Request]context.CancelFunc{}}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = target.Host },
		Transport:     transport,
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.failing.Load() {
			p.failed.Add(1)
			http.Error(w, "the test's API server is down", http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		r = r.WithContext(ctx)
		p.mu.Lock()
		p.open[r] = cancel
		p.log = append(p.log, apiRequest{at: time.Now(), method: r.Method, query: r.URL.Query()})
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			delete(p.open, r)
			p.mu.Unlock()
			cancel()
		}()
		rp.ServeHTTP(w, r)
	}))
	p.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	p.srv.StartTLS()
	tb.Cleanup(func() {
		p.fail(true) // ends the watches still open, which Close would wait for
		p.srv.Close()
	})
	return p
}

// fail makes the API server unreachable (on) or reachable again (off); going down ends
// every request in flight, watches included.
func (p *apiProxy) fail(on bool) {
	p.failing.Store(on)
	if !on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cancel := range p.open {
		cancel()
	}
}

// kubeconfig writes a kubeconfig for ServiceAccount ns/name with a token from the
// TokenRequest API (as a pod's projected token is), pointed at the proxy.
func (p *apiProxy) kubeconfig(tb testing.TB, e *env, ns, name string) string {
	tb.Helper()
	tr, err := e.cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("token of ServiceAccount %s/%s: %v", ns, name, err)
	}
	cfg := clientcmdapi.NewConfig()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: p.srv.URL, CertificateAuthorityData: ca}
	cfg.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "sa"}
	cfg.CurrentContext = "c"
	path := filepath.Join(shortTempDir(tb), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		tb.Fatal(err)
	}
	return path
}
