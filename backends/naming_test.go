package backends

import (
	"fmt"
	"math/rand"
	"regexp"
	"strings"
	"testing"
)

func TestWorkloadName(t *testing.T) {
	long := strings.Repeat("very-long-graph-name-", 4)
	cases := map[string]struct {
		dgd, service, hash, want string
	}{
		"stable service keeps {dgd}-{service}, lower-cased": {"vllm-disagg", "Frontend", "", "vllm-disagg-frontend"},
		"worker revision appends the hash":                  {"vllm-disagg", "VllmDecodeWorker", "59f76cf9d4", "vllm-disagg-vllmdecodeworker-59f76cf9d4"},
		"characters outside DNS labels become dashes":       {"g", "my_svc.x", "h1", "g-my-svc-x-h1"},
		"a long name keeps its hash and a digest":           {long, "decode", "59f76cf9d4", ""},
		"group names are {dgd}-{hash}":                      {"vllm", "", "abc", "vllm-abc"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := WorkloadName(c.dgd, c.service, c.hash)
			if c.service == "" {
				got = GroupName(c.dgd, c.hash)
			}
			if len(got) > MaxNameLength {
				t.Fatalf("%q is %d characters, more than %d", got, len(got), MaxNameLength)
			}
			if c.want != "" && got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
			if c.hash != "" && !strings.HasSuffix(got, "-"+c.hash) {
				t.Fatalf("%q lost its hash suffix", got)
			}
		})
	}
	a := WorkloadName(long, "decode-a", "h")
	b := WorkloadName(long, "decode-b", "h")
	if a == b {
		t.Fatalf("distinct long names collide: %q", a)
	}
}

// lastSegment is what follows a name's last dash.
func lastSegment(name string) string { return name[strings.LastIndex(name, "-")+1:] }

func isHex(s string) bool {
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return s != ""
}

// dnsLabel matches a Service name (RFC 1035 label, as Services are named, though a
// DGD name may start with a digit: the API server then refuses it, a limit of names
// the DGD already has) of at most 63 characters.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// classes names every name of one generated shape.
type classes struct {
	discovery, cohort, workerLWS, stableLWS, groveSvc map[string]string // name -> the inputs that made it
	seen                                              map[string]bool   // DGD names whose PodCliqueSets are in
}

func (c *classes) add(t *testing.T, d, s, h string) {
	t.Helper()
	in := fmt.Sprintf("dgd %q service %q hash %q", d, s, h)
	for _, n := range []struct {
		m    map[string]string
		name string
	}{{c.discovery, DiscoveryServiceName(d, s, h)}, {c.cohort, CohortServiceName(d, s, h)}, {c.workerLWS, GangSetName(d, s, h)}, {c.stableLWS, GangSetName(d, s, "")}} {
		if len(n.name) > MaxNameLength || !dnsLabel.MatchString(n.name) {
			t.Fatalf("%s: %q is no name of at most %d characters", in, n.name, MaxNameLength)
		}
		n.m[n.name] = in
	}
	if c.seen[d] {
		return
	}
	c.seen[d] = true
	for k := 0; k < 12; k++ {
		for _, max := range []int{3, 4, 5, 7, 12, 45} {
			if pcs, ok := PodCliqueSetName(d, k, max); ok {
				if len(pcs) > max || !dnsLabel.MatchString(pcs) {
					t.Fatalf("%s: PodCliqueSet candidate %d of at most %d characters is %q", in, k, max, pcs)
				}
				c.groveSvc[pcs+"-0"] = fmt.Sprintf("dgd %q candidate %d room %d", d, k, max)
			}
		}
	}
}

// check proves the four shapes disjoint: every name of a shape ends in its own last
// segment, and no name is in two shapes.
func (c *classes) check(t *testing.T) {
	t.Helper()
	for n := range c.discovery {
		if lastSegment(n) != DiscoverySuffix {
			t.Errorf("discovery Service %q (%s) does not end in -%s", n, c.discovery[n], DiscoverySuffix)
		}
	}
	for n := range c.cohort {
		if lastSegment(n) != CohortSuffix {
			t.Errorf("cohort Service %q (%s) does not end in -%s", n, c.cohort[n], CohortSuffix)
		}
	}
	for n := range c.workerLWS {
		if s := lastSegment(n); !isHex(s) || s == "0" {
			t.Errorf("worker LeaderWorkerSet %q (%s) does not end in its hash", n, c.workerLWS[n])
		}
	}
	for n := range c.stableLWS {
		if lastSegment(n) != StableGangSuffix {
			t.Errorf("stable LeaderWorkerSet %q (%s) does not end in -%s", n, c.stableLWS[n], StableGangSuffix)
		}
	}
	for n := range c.groveSvc {
		if lastSegment(n) != "0" {
			t.Errorf("Grove's headless Service %q (%s) does not end in -0", n, c.groveSvc[n])
		}
	}
	for _, ours := range []struct {
		what string
		m    map[string]string
	}{{"discovery", c.discovery}, {"cohort", c.cohort}} {
		for _, theirs := range []struct {
			what string
			m    map[string]string
		}{{"the headless Service LWS creates for a worker revision's LeaderWorkerSet", c.workerLWS},
			{"the headless Service LWS creates for a stable LeaderWorkerSet", c.stableLWS},
			{"Grove's headless Service of a PodCliqueSet", c.groveSvc}} {
			for n, in := range ours.m {
				if other, ok := theirs.m[n]; ok {
					t.Errorf("%s Service %q (%s) is %s (%s)", ours.what, n, in, theirs.what, other)
				}
			}
		}
	}
	for n, in := range c.cohort {
		if other, ok := c.discovery[n]; ok {
			t.Errorf("cohort Service %q (%s) is also a discovery Service (%s)", n, in, other)
		}
	}
	for n, in := range c.groveSvc {
		for _, lws := range []map[string]string{c.workerLWS, c.stableLWS} {
			if other, ok := lws[n]; ok {
				t.Errorf("Grove's Service %q (%s) is also a LeaderWorkerSet's (%s)", n, in, other)
			}
		}
	}
}

func newClasses() *classes {
	return &classes{discovery: map[string]string{}, cohort: map[string]string{}, workerLWS: map[string]string{}, stableLWS: map[string]string{}, groveSvc: map[string]string{}, seen: map[string]bool{}}
}

// TestNamesDisjointExhaustive generates every DGD name and service name of up to three
// characters over a, 0, '-' (and '.' in DGD names; four characters), valid as Kubernetes and the CRD
// accept them, with hashes of the revisions' shape (8 hex, and 10 hex as an earlier
// operator made them), and proves that no discovery Service of ours can take a name
// LWS or Grove creates a Service under, and LWS and Grove never the same one.
func TestNamesDisjointExhaustive(t *testing.T) {
	var words func(alphabet string, n int) []string
	words = func(alphabet string, n int) []string {
		if n == 0 {
			return []string{""}
		}
		var out []string
		for _, w := range words(alphabet, n-1) {
			for _, c := range alphabet {
				out = append(out, w+string(c))
			}
		}
		return out
	}
	dgdName := regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	serviceName := regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?$`)
	var dgds, services []string
	for n := 1; n <= 4; n++ {
		for _, w := range words("a0-.", n) {
			if dgdName.MatchString(w) && !strings.Contains(w, "..") {
				dgds = append(dgds, w)
			}
		}
		for _, w := range words("a0-", n) {
			if n < 4 && serviceName.MatchString(w) {
				services = append(services, w)
			}
		}
	}
	c := newClasses()
	for _, d := range dgds {
		for _, s := range services {
			for _, h := range []string{"00000000", "0a1b2c3d", "deadbeef", "0123456789"} {
				c.add(t, d, s, h)
			}
		}
	}
	c.check(t)
	t.Logf("%d DGD names x %d service names: %d discovery Services, %d + %d LeaderWorkerSets, %d Grove Services",
		len(dgds), len(services), len(c.discovery), len(c.workerLWS), len(c.stableLWS), len(c.groveSvc))
}

// TestNamesDisjointGenerated does the same over random names of every length up to the
// limits (DGD names to 63 characters, service names to 40), so that long names take
// capName's digested form.
func TestNamesDisjointGenerated(t *testing.T) {
	rnd := rand.New(rand.NewSource(22))
	word := func(alphabet string, min, max int) string {
		n := min + rnd.Intn(max-min+1)
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rnd.Intn(len(alphabet))]
		}
		return string(b)
	}
	alnum := "abcdefghijklmnopqrstuvwxyz0123456789"
	c := newClasses()
	for i := 0; i < 5000; i++ {
		d := word(alnum, 1, 1) + word(alnum+"-.", 0, 61) + word(alnum, 1, 1)
		d = strings.ReplaceAll(d, "..", ".a")
		s := word(alnum+"ABCDEFGHIJKLMNOPQRSTUVWXYZ", 1, 1)
		if rnd.Intn(4) == 0 {
			s += word("0123456789", 0, 8) // digits only
		} else if l := rnd.Intn(39); l > 0 {
			s += word(alnum+"-", 0, l-1) + word(alnum, 1, 1)
		}
		h := fmt.Sprintf("%08x", rnd.Uint32())
		c.add(t, d, s, h)
	}
	c.check(t)
}

// TestNamesOfIssue22 are the issue's worked cases.
func TestNamesOfIssue22(t *testing.T) {
	// SGLang disaggregated on LWS, decode service: the LeaderWorkerSet (and LWS's
	// headless Service) and the revision's discovery Service shared a name.
	lws, disc := GangSetName("sgl", "decode", "1a2b3c4d"), DiscoveryServiceName("sgl", "decode", "1a2b3c4d")
	if lws != "sgl-decode-1a2b3c4d" || disc != "sgl-decode-1a2b3c4d-discovery" {
		t.Errorf("LeaderWorkerSet %q, discovery Service %q", lws, disc)
	}
	// A TRT-LLM worker with a name long enough to be capped keeps both apart.
	long := strings.Repeat("trtllm-", 6)
	if a, b := GangSetName(long, "TrtllmWorker", "1a2b3c4d"), DiscoveryServiceName(long, "TrtllmWorker", "1a2b3c4d"); a == b || len(b) > MaxNameLength {
		t.Errorf("capped: LeaderWorkerSet %q, discovery Service %q", a, b)
	}
	// A stable multinode service on LWS: its Service is Dynamo's `{dgd}-{service}`,
	// which its LeaderWorkerSet's name was too.
	if got := GangSetName("g", "Frontend", ""); got != "g-frontend-lws" {
		t.Errorf("stable LeaderWorkerSet %q", got)
	}
	// Grove: DGD vg with the multinode worker VllmPrefillWorker is Dynamo's 2 + 17 + 21
	// = 40 characters; `{dgd}-{hash}` made it 49. The first PodCliqueSet costs nothing,
	// the next ones 2 characters, and at the limit the DGD's name gives way.
	room := 45 - len("vllmprefillworker") - len("vllmprefillworker-ldr")
	for k, want := range []string{"vg", "vg-1", "vg-2"} {
		if got, ok := PodCliqueSetName("vg", k, room); !ok || got != want {
			t.Errorf("candidate %d: %q, want %q", k, got, want)
		}
	}
	if got, ok := PodCliqueSetName("vllm-agg", 1, len("vllm-agg")); !ok || got != "vllm-a-1" {
		t.Errorf("candidate 1 of a DGD at the limit: %q, want vllm-a-1", got)
	}
	if _, ok := PodCliqueSetName("vg", 1, 2); ok {
		t.Error("a 2-character room holds no second name (vg-1 is 4, v-1 is 3)")
	}
	// A digits-only service name: the stable Service of service "0" is `{dgd}-0`, the
	// headless Service Grove makes for a PodCliqueSet named `{dgd}` (the Grove backend
	// skips that candidate: backends/grove TestPicksFreeNames).
	if first, _ := PodCliqueSetName("g", 0, 45); first+"-0" != WorkloadName("g", "0", "") {
		t.Errorf("the worked collision changed: %q", first)
	}
}
