// Package opproc runs the operator binary (cmd/manager) as its own process, the way it
// runs in a cluster, behind a proxy to the API server that records every request it
// makes: for benchmarks that measure its memory (a separate process's peak RSS) and
// its API traffic by verb and resource.
package opproc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Build compiles cmd/manager from the repository at root into dir and returns the
// binary's path.
func Build(root, dir string) (string, error) {
	bin := filepath.Join(dir, "manager")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the operator: %v\n%s", err, out)
	}
	return bin, nil
}

// Request is one API request the operator made.
type Request struct {
	At              time.Time
	Verb            string // GET, LIST, WATCH, POST, PUT, PATCH, DELETE
	Resource        string // e.g. deployments, dynamographdeployments/status, events
	Namespace, Name string // Name: of the object, also of a create (from its body); of the regarded object for a new Event
	// Reason is a new Event's reason ("" for every other request).
	Reason string
	// Took is how long the API server took to answer (0 while it has not).
	Took time.Duration
}

// Write reports whether the request changed something.
func (r Request) Write() bool {
	switch r.Verb {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// Proxy forwards to the API server as the cluster admin, on a plain HTTP port of
// 127.0.0.1, and records every request. It speaks plain HTTP to the operator because it
// is a measuring instrument in the operator's path alone (kube-controller-manager talks
// to the API server directly): a second TLS layer cost the operator's side of benchmark
// P3 CPU that a real cluster never spends.
type Proxy struct {
	// Kubeconfig points a client at the proxy.
	Kubeconfig string
	srv        *http.Server

	mu       sync.Mutex
	requests []Request
}

// StartProxy starts a proxy to the API server of cfg, writing its kubeconfig into dir.
func StartProxy(cfg *rest.Config, dir string) (*Proxy, error) {
	p := &Proxy{Kubeconfig: filepath.Join(dir, "proxy.kubeconfig")}
	srv, err := ServeProxy(cfg, p.Kubeconfig, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			i := p.record(r)
			next.ServeHTTP(w, r)
			p.took(i)
		})
	})
	p.srv = srv
	return p, err
}

// ServeProxy serves a reverse proxy of the API server of cfg (with cfg's credentials)
// on a plain HTTP port of 127.0.0.1, every request going through wrap, and writes a
// kubeconfig for it to kubeconfig. Watches stream. Close the server to stop it.
func ServeProxy(cfg *rest.Config, kubeconfig string, wrap func(next http.Handler) http.Handler) (*http.Server, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = target.Host },
		Transport:     transport,
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	srv := &http.Server{Handler: wrap(rp), ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(ln) }()
	if err := os.WriteFile(kubeconfig, Kubeconfig(ln.Addr().String()), 0o600); err != nil {
		_ = srv.Close()
		return nil, err
	}
	return srv, nil
}

// Kubeconfig is a kubeconfig for a plain HTTP proxy of the API server listening on
// addr (the proxy adds the credentials).
func Kubeconfig(addr string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: proxy
  cluster: {server: "http://%s"}
users:
- name: admin
  user: {}
contexts:
- name: proxy
  context: {cluster: proxy, user: admin}
current-context: proxy
`, addr))
}

// Close stops the proxy.
func (p *Proxy) Close() error { return p.srv.Close() }

func (p *Proxy) record(r *http.Request) int {
	req := parse(r)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = append(p.requests, req)
	return len(p.requests) - 1
}

// took records how long request i took to answer (a watch: how long it stayed open).
func (p *Proxy) took(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests[i].Took = time.Since(p.requests[i].At)
}

// Requests returns the requests recorded since since.
func (p *Proxy) Requests(since time.Time) []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Request
	for _, r := range p.requests {
		if !r.At.Before(since) {
			out = append(out, r)
		}
	}
	return out
}

// parse reads a Kubernetes API path: /api/v1/namespaces/ns/pods/name/status or
// /apis/group/version/namespaces/ns/resource[/name[/subresource]].
func parse(r *http.Request) Request {
	req := Request{At: time.Now(), Verb: r.Method}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return req
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		req.Namespace, parts = parts[1], parts[2:]
	}
	if len(parts) >= 1 {
		req.Resource = parts[0]
	}
	if len(parts) >= 2 {
		req.Name = parts[1]
	}
	if len(parts) >= 3 {
		req.Resource += "/" + parts[2]
	}
	if r.Method == http.MethodPost && r.Body != nil {
		// A create names its object in the body (JSON, or protobuf for built-in kinds);
		// an Event names the object it regards.
		body, err := io.ReadAll(r.Body)
		if err == nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
			req.Name, req.Reason = createdName(body)
		}
	}
	if r.Method == http.MethodGet {
		switch {
		case r.URL.Query().Get("watch") == "true":
			req.Verb = "WATCH"
		case req.Name == "":
			req.Verb = "LIST"
		}
	}
	return req
}

// Process is one running operator.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs bin with KUBECONFIG=kubeconfig and args, its output appended to logPath,
// in its own process group, killed with the test process.
func Start(bin, kubeconfig, logPath string, args ...string) (*Process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = f.Close(); close(p.done) }()
	return p, nil
}

// PeakRSS is the process's peak resident set size (VmHWM), in bytes.
func (p *Process) PeakRSS() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", p.cmd.Process.Pid)
}

// Stop SIGTERMs the process and waits until it is gone (SIGKILL after 10 s).
func (p *Process) Stop() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// decoder reads the bodies of the operator's creates.
var decoder = func() runtime.Decoder {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	return serializer.NewCodecFactory(s).UniversalDeserializer()
}()

// createdName is the name of the object a create's body holds, or for an Event the name
// of the object it regards and the Event's reason; "" when the body is none of the
// built-in kinds (a custom resource's JSON is read for metadata.name).
func createdName(body []byte) (name, reason string) {
	obj, _, err := decoder.Decode(body, nil, nil)
	if err != nil {
		var u struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if json.Unmarshal(body, &u) == nil {
			return u.Metadata.Name, ""
		}
		return "", ""
	}
	if ev, ok := obj.(*eventsv1.Event); ok {
		return ev.Regarding.Name, ev.Reason
	}
	if m, err := meta.Accessor(obj); err == nil {
		return m.GetName(), ""
	}
	return "", ""
}
