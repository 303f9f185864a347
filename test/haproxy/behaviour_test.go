package haproxy

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dgd-rollout/operator/traffic"
	"github.com/dgd-rollout/operator/traffic/proxy"
)

func plain() chatRequest {
	return chatRequest{Model: "stand-in", Messages: []chatMessage{{Role: "user", Content: "hi"}}, Tokens: 8}
}

// answeredBy sends n plain requests to entry and fails unless cohort answered each.
func answeredBy(t *testing.T, entry, cohort string, n int) {
	t.Helper()
	c := newClient()
	for i := 0; i < n; i++ {
		if r := send(context.Background(), c, entry, plain(), nil); r.err != nil || r.cohort != cohort {
			t.Fatalf("request %d: answered by %q (%v), want %q", i, r.cohort, r.err, cohort)
		}
	}
}

// TestNoAdminPort: over TCP, HAProxy listens on its client port alone and the agent on
// its probe port alone; the runtime API is a UNIX socket of mode 0600 in the pod's
// directory; the probe port answers GET of its three paths and nothing else, and the
// client port has no stats page (a request for one reaches the frontend).
func TestNoAdminPort(t *testing.T) {
	e := getEnv(t)
	g := e.newGraph(t)
	f := startFrontend(t, "aaaa0001")
	tr := g.traffic([]traffic.Cohort{g.cohort(f, 100)}, nil)
	g.startPods(t, tr, 1)
	g.inEffect(t, tr)
	p := g.pods[0]

	for what, want := range map[string]struct {
		pid  int
		addr string
	}{"HAProxy": {p.HAProxy().PID(), p.Entry}, "the agent": {p.Agent().PID(), strings.TrimPrefix(p.Health, "http://")}} {
		_, port, _ := strings.Cut(want.addr, ":")
		if got := listening(t, want.pid); !slices.Equal(got, []string{port}) {
			t.Errorf("%s listens on TCP ports %v, want %s alone", what, got, port)
		}
	}
	if fi, err := os.Stat(filepath.Join(p.Dir, proxy.SocketFile)); err != nil {
		t.Errorf("runtime API socket: %v", err)
	} else if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("runtime API socket of mode %v, want a socket of mode 0600", fi.Mode())
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(m, p.Health+"/readyz", strings.NewReader("x"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s /readyz on the probe port: %s, want 405", m, resp.Status)
		}
	}
	for _, path := range []string{"/", "/stats", "/haproxy?stats", "/runtime"} {
		if code := p.Probe(path); code != http.StatusNotFound {
			t.Errorf("GET %s on the probe port: %d, want 404", path, code)
		}
		resp, err := http.Get("http://" + p.Entry + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Errorf("GET %s on the client port: %s %v, want the frontend's 404", path, resp.Status, resp.Header)
		}
	}
}

// listening is the local ports of the TCP sockets process pid listens on (its fds'
// socket inodes looked up in /proc/net/tcp and tcp6, state 0A: LISTEN).
func listening(t *testing.T, pid int) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name())
		if ino, ok := strings.CutPrefix(link, "socket:["); ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	var ports []string
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			col := strings.Fields(sc.Text())
			if len(col) < 10 || col[3] != "0A" || !inodes[col[9]] {
				continue
			}
			_, hexPort, _ := strings.Cut(col[1], ":")
			port, _ := strconv.ParseUint(hexPort, 16, 16)
			ports = append(ports, strconv.FormatUint(port, 10))
		}
		_ = f.Close()
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// TestHAProxyRestart: HAProxy stops; a split written meanwhile cannot be applied, which
// the agent reports, and its pod is not ready; HAProxy started again (its container's
// command) serves that split from its first request, since the agent wrote it into
// haproxy.cfg; the agent then reports it in effect and is ready.
func TestHAProxyRestart(t *testing.T) {
	e := getEnv(t)
	g := e.newGraph(t)
	a, b := startFrontend(t, "aaaa0001"), startFrontend(t, "bbbb0002")
	one := g.traffic([]traffic.Cohort{g.cohort(a, 100)}, nil)
	g.startPods(t, one, 1)
	g.inEffect(t, one)
	p := g.pods[0]

	p.HAProxy().Stop(5 * time.Second)
	two := g.traffic([]traffic.Cohort{g.cohort(b, 100)}, nil)
	g.write(t, two)
	g.waitEffect(t, two, "the agent reporting HAProxy unreachable", 30*time.Second, func(e traffic.Effect) bool {
		return strings.Contains(e.Message, "runtime API")
	})
	if code := p.Probe("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz with HAProxy down: %d, want 503", code)
	}
	s, _, _ := proxy.SplitOf(two)
	if cfg, err := os.ReadFile(proxy.ConfigPath(p.Dir)); err != nil || !strings.Contains(string(cfg), "split "+s.Version()) {
		t.Fatalf("haproxy.cfg does not hold split %s: %v\n%s", s.Version(), err, cfg)
	}
	p.startHAProxy(t)
	answeredBy(t, p.Entry, b.cohort, 20)
	g.inEffect(t, two)
	p.waitHTTP(t, "/readyz")
}

// TestAPIServerErrors: with the API server unreachable, the agent retries with backoff
// (a few refused requests, no busy loop) and HAProxy keeps serving the split it has;
// once the API server answers again, the split written meanwhile comes into effect.
func TestAPIServerErrors(t *testing.T) {
	e := getEnv(t)
	g := e.newGraph(t)
	a, b := startFrontend(t, "aaaa0001"), startFrontend(t, "bbbb0002")
	one := g.traffic([]traffic.Cohort{g.cohort(a, 100)}, nil)
	g.startPods(t, one, 1)
	g.inEffect(t, one)
	p := g.pods[0]

	down := time.Now()
	g.api.fail(true)
	two := g.traffic([]traffic.Cohort{g.cohort(a, 0), g.cohort(b, 100)}, nil)
	g.write(t, two) // the test's own client: the API server itself is up
	eventually(t, 30*time.Second, "the agent retrying 3 times", func() bool { return g.api.failed.Load() >= 3 })
	n, took := g.api.failed.Load(), time.Since(down)
	t.Logf("%d requests refused in %s", n, took.Round(time.Millisecond))
	if rate := float64(n) / took.Seconds(); rate > 5 {
		t.Errorf("%d requests refused in %s: a busy loop", n, took)
	}
	answeredBy(t, p.Entry, a.cohort, 10)
	g.api.fail(false)
	up := time.Now()
	g.waitEffect(t, two, "the split in effect once the API server is back", 90*time.Second, func(e traffic.Effect) bool { return e.InEffect })
	t.Logf("in effect %s after the API server came back", time.Since(up).Round(time.Millisecond))
	answeredBy(t, p.Entry, b.cohort, 10)
}

// TestRoleAsTheAPIServerSees: the API server's authorizer grants the agent's
// ServiceAccount what the agent does (TestRollout's agents run under it) and nothing
// next to it.
func TestRoleAsTheAPIServerSees(t *testing.T) {
	e := getEnv(t)
	g := e.newGraph(t)
	tr := g.traffic(nil, nil)
	g.write(t, tr)
	sa := "system:serviceaccount:" + g.ns + ":" + proxy.Name(tr)
	allowed := func(verb, resource, name string) bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: sa,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + g.ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: g.ns, Verb: verb, Resource: resource, Name: name}}}
		got, err := e.cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Status.Allowed
	}
	desired, status := proxy.Name(tr), proxy.StatusName(tr)
	// The authorizer learns of a new RoleBinding through its informers.
	eventually(t, 30*time.Second, "the RoleBinding seen by the authorizer", func() bool { return allowed("get", "configmaps", desired) })
	cases := []struct {
		verb, resource, name string
		want                 bool
	}{
		{"get", "configmaps", desired, true}, {"watch", "configmaps", desired, true}, {"list", "configmaps", desired, true},
		{"get", "configmaps", status, true}, {"patch", "configmaps", status, true},
		{"update", "configmaps", desired, false}, {"patch", "configmaps", desired, false}, {"delete", "configmaps", desired, false},
		{"update", "configmaps", status, false}, {"delete", "configmaps", status, false}, {"watch", "configmaps", status, false},
		{"list", "configmaps", "", false}, {"create", "configmaps", "", false}, {"get", "configmaps", "kube-root-ca.crt", false},
		{"get", "secrets", desired, false}, {"list", "pods", "", false}, {"get", "deployments", desired, false},
	}
	for _, c := range cases {
		if got := allowed(c.verb, c.resource, c.name); got != c.want {
			t.Errorf("%s %s %q: allowed %t, want %t", c.verb, c.resource, c.name, got, c.want)
		}
	}
}
