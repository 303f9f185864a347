package haproxy

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dgd-rollout/operator/freeport"
	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/traffic/proxy"
	hap "github.com/dgd-rollout/operator/traffic/proxy/haproxy"
)

// TestPinNotCachedAcrossCommit: a request matched against the pin ACL while a header
// route is being added (after `add acl @<ver>`, before `commit acl @<ver>`) does not
// decide requests after the commit. HAProxy 2.6 caches a "reg" ACL's result per thread
// (tune.pattern.cache-size, default 10,000), keyed by the input and the ACL's
// revision; `add acl` moves the revision and `commit acl` does not, nor does the purge
// of an empty old version (src/pattern.c pat_match_reg, include/haproxy/pattern.h
// pat_ref_commit, src/map.c cli_parse_commit_map, at v2.6.0). So a "no match" cached in
// that moment outlives the commit: every later request of the same header bytes on that
// thread went by the split, not the route, until the ACL changed again (CI, Dec 2:
// 55 of 576 header-route requests answered by the stable cohort). The agent's
// configuration turns the cache off (tune.pattern.cache-size 0, configuration.txt).
//
// The test runs HAProxy on the agent's configuration, no route, stable at 100%; adds the
// route's pattern without committing it; sends requests with the route's header (all
// answered by the stable, the pattern not yet committed); commits and gives the
// candidate its pin weight, as the agent does; then every such request must reach the
// candidate.
func TestPinNotCachedAcrossCommit(t *testing.T) {
	path := requireHAProxy(t)
	stable, candidate := startFrontend(t, stableHash), startFrontend(t, candidateHash)
	dir := shortTempDir(t)
	port, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	entry := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cohort := func(f *frontend, w int32) proxy.SplitCohort {
		return proxy.SplitCohort{Hash: f.cohort, Address: "127.0.0.1", Port: int32(f.addr.Port), Weight: w}
	}
	split := proxy.Split{Cohorts: []proxy.SplitCohort{cohort(stable, 100), cohort(candidate, 0)}}
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(hap.PinPath(dir), hap.PinFile(split), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, hap.Config(hap.Params{Dir: dir, Bind: entry, DrainTimeout: 5 * time.Second,
		Split: split, Version: "v1"}), 0o600); err != nil {
		t.Fatal(err)
	}
	child, err := cluster.StartChild(exec.Command(path, "-db", "-f", cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Stop(5 * time.Second) })
	ctx := context.Background()
	c := hap.Client{Socket: hap.Socket(dir)}
	eventually(t, 10*time.Second, "HAProxy's runtime API", func() bool { _, err := c.Run(ctx, "show info"); return err == nil })
	run := func(cmd string) string {
		t.Helper()
		out, err := c.Run(ctx, cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return out
	}

	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	ask := func() map[string]int {
		got := map[string]int{}
		for range 40 { // over HAProxy's threads: keep-alive off, a new connection each
			r := send(ctx, client, entry, plain(), http.Header{routeName: {routeValue}})
			if r.err != nil {
				t.Fatal(r.err)
			}
			got[r.cohort]++
			client.CloseIdleConnections()
		}
		return got
	}
	if got := ask(); got[stableHash] != 40 {
		t.Fatalf("before the route: answered by %v, want the stable only", got)
	}

	route := proxy.Split{Cohorts: split.Cohorts, HeaderRoute: &proxy.SplitHeaderRoute{Name: routeName, Value: routeValue, Hash: candidateHash}}
	file := hap.Escape(hap.PinPath(dir))
	_, ver, _ := strings.Cut(run("prepare acl "+file), "New version created: ")
	ver = "@" + strings.TrimSpace(ver) + " "
	if out := run("add acl " + ver + file + " " + hap.Escape(hap.PinPattern(route))); out != "" {
		t.Fatalf("add acl: %s", out)
	}
	if got := ask(); got[stableHash] != 40 {
		t.Fatalf("the route added, not committed: answered by %v, want the stable only", got)
	}
	for _, cmd := range []string{"commit acl " + ver + file, "set server " + hap.PinBackend + "/" + hap.ServerName(candidateHash) + " weight 1"} {
		if out := run(cmd); out != "" {
			t.Fatalf("%s: %s", cmd, out)
		}
	}
	if got := ask(); got[candidateHash] != 40 {
		t.Errorf("the route committed: answered by %v, want the candidate only (a match cached before the commit outlived it)", got)
	}
}
