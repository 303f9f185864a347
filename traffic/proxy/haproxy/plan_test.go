package haproxy_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dgd-rollout/operator/traffic/proxy"
	"github.com/dgd-rollout/operator/traffic/proxy/haproxy"
)

// stateOf is the State of a split as HAProxy holds it after starting on its
// configuration, in flight counts by server ID ("split/c-<hash>") set as given.
func stateOf(s proxy.Split, inFlight map[string]int64) haproxy.State {
	var st haproxy.State
	for _, be := range []string{haproxy.PinBackend, haproxy.SplitBackend} {
		for _, c := range s.Cohorts {
			w := c.Weight
			if be == haproxy.PinBackend {
				w = haproxy.PinWeight(s, c.Hash)
			}
			name := haproxy.ServerName(c.Hash)
			st.Servers = append(st.Servers, haproxy.Server{Backend: be, Name: name, Addr: haproxy.Address(c), Weight: w,
				InFlight: inFlight[be+"/"+name]})
		}
	}
	if p := haproxy.PinPattern(s); p != "" {
		st.Pins = []string{p}
	}
	return st
}

func commands(steps []haproxy.Step) []string {
	var out []string
	for _, s := range steps {
		if s.ReplacePin {
			out = append(out, "replace pin with "+strconv.Quote(s.Pattern))
			continue
		}
		out = append(out, s.Command)
	}
	return out
}

// TestPlan: the steps from one state to a split, in order.
func TestPlan(t *testing.T) {
	pin := strconv.Quote(haproxy.PinPattern(split(90, 10, true)))
	onlyStable := proxy.Split{Cohorts: split(100, 0, false).Cohorts[:1]}
	cases := map[string]struct {
		from haproxy.State
		to   proxy.Split
		want []string
	}{
		"nothing to do": {stateOf(split(90, 10, true), nil), split(90, 10, true), nil},
		"a weight step: the candidate rises first": {stateOf(split(90, 10, false), nil), split(70, 30, false), []string{
			"set server split/c-9b0e44f2 weight 30", "set server split/c-6d5f7c1a weight 70"}},
		"a new cohort: added in maintenance, enabled, then the stable lowered": {stateOf(onlyStable, nil), split(90, 10, false), []string{
			"add server split/c-9b0e44f2 10.96.40.3:8000 weight 10", "enable server split/c-9b0e44f2",
			"add server pin/c-9b0e44f2 10.96.40.3:8000 weight 0", "enable server pin/c-9b0e44f2",
			"set server split/c-6d5f7c1a weight 90"}},
		"a header route: its pin server up before the pattern": {stateOf(split(90, 10, false), nil), split(90, 10, true), []string{
			"set server pin/c-9b0e44f2 weight 1", "replace pin with " + pin}},
		"no header route: the pattern goes before the pin weight": {stateOf(split(90, 10, true), nil), split(90, 10, false), []string{
			`replace pin with ""`, "set server pin/c-9b0e44f2 weight 0"}},
		"an abort: every weight to the stable": {stateOf(split(70, 30, true), nil), split(100, 0, false), []string{
			"set server split/c-6d5f7c1a weight 100", `replace pin with ""`,
			"set server split/c-9b0e44f2 weight 0", "set server pin/c-9b0e44f2 weight 0"}},
		"a cohort removed while serving: weight 0 only": {stateOf(split(90, 10, false), map[string]int64{"split/c-9b0e44f2": 3}), onlyStable, []string{
			"set server split/c-6d5f7c1a weight 100", "set server split/c-9b0e44f2 weight 0"}},
		"a cohort removed at 0, still serving: nothing yet": {stateOf(split(100, 0, false), map[string]int64{"pin/c-9b0e44f2": 1}), onlyStable, nil},
		"a cohort removed at 0, drained: into maintenance": {stateOf(split(100, 0, false), nil), onlyStable, []string{
			"disable server pin/c-9b0e44f2", "disable server split/c-9b0e44f2"}},
		"a cohort in maintenance: deleted": {maint(stateOf(split(100, 0, false), nil), candidate), onlyStable, []string{
			"del server pin/c-9b0e44f2", "del server split/c-9b0e44f2"}},
		"a cohort back while being removed: enabled again": {maint(stateOf(split(100, 0, false), nil), candidate), split(90, 10, false), []string{
			"enable server split/c-9b0e44f2", "enable server pin/c-9b0e44f2", "set server split/c-9b0e44f2 weight 10",
			"set server split/c-6d5f7c1a weight 90"}},
		"a cohort's Service recreated: its address changed": {stateOf(split(90, 10, false), nil), readdress(split(90, 10, false), "10.96.40.9"), []string{
			"set server split/c-9b0e44f2 addr 10.96.40.9 port 8000", "set server pin/c-9b0e44f2 addr 10.96.40.9 port 8000"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, commands(haproxy.Plan(c.from, c.to))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func maint(st haproxy.State, hash string) haproxy.State {
	for i := range st.Servers {
		if st.Servers[i].Name == haproxy.ServerName(hash) {
			st.Servers[i].Maint = true
		}
	}
	return st
}

func readdress(s proxy.Split, addr string) proxy.Split {
	s.Cohorts[1].Address = addr
	return s
}

// TestCheck names what differs from the split.
func TestCheck(t *testing.T) {
	cases := map[string]struct {
		st   haproxy.State
		want string
	}{
		"the split":         {stateOf(split(70, 30, true), nil), ""},
		"a weight behind":   {stateOf(split(90, 10, true), nil), "server split/c-6d5f7c1a is at 10.96.12.7:8000 weight 90 maintenance false, not 10.96.12.7:8000 weight 70; server split/c-9b0e44f2 is at 10.96.40.3:8000 weight 10 maintenance false, not 10.96.40.3:8000 weight 30"},
		"no header route":   {stateOf(split(70, 30, false), nil), "server pin/c-9b0e44f2 is at 10.96.40.3:8000 weight 0 maintenance false, not 10.96.40.3:8000 weight 1; pin ACL holds [], not " + strconv.Quote(haproxy.PinPattern(split(70, 30, true)))},
		"a cohort missing":  {stateOf(proxy.Split{Cohorts: split(70, 30, true).Cohorts[:1]}, nil), "no server split/c-9b0e44f2; no server pin/c-9b0e44f2; pin ACL holds [], not " + strconv.Quote(haproxy.PinPattern(split(70, 30, true)))},
		"in maintenance":    {maint(stateOf(split(70, 30, true), nil), stable), "server split/c-6d5f7c1a is at 10.96.12.7:8000 weight 70 maintenance true, not 10.96.12.7:8000 weight 70; server pin/c-6d5f7c1a is at 10.96.12.7:8000 weight 0 maintenance true, not 10.96.12.7:8000 weight 0"},
		"an extra drained":  {stateOf(withExtra(split(70, 30, true), 0), nil), ""},
		"an extra weighted": {stateOf(withExtra(split(70, 30, true), 5), nil), "server split/c-0000beef of a cohort removed still has weight 5"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, haproxy.Check(c.st, split(70, 30, true))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func withExtra(s proxy.Split, w int32) proxy.Split {
	s.Cohorts = append(s.Cohorts, proxy.SplitCohort{Hash: "0000beef", Address: "10.96.0.1", Port: 8000, Weight: w})
	return s
}

// fake plays HAProxy's runtime API over a State: what each command does, as
// management.txt section 9.3 says.
type fake struct{ st haproxy.State }

func (f *fake) run(s haproxy.Step) error {
	if s.ReplacePin {
		f.st.Pins = nil
		if s.Pattern != "" {
			f.st.Pins = []string{s.Pattern}
		}
		return nil
	}
	w := strings.Fields(s.Command)
	be, name, _ := strings.Cut(w[2], "/")
	i := -1
	for j, srv := range f.st.Servers {
		if srv.Backend == be && srv.Name == name {
			i = j
		}
	}
	switch verb := w[0] + " " + w[1]; {
	case verb == "add server" && i < 0:
		weight, _ := strconv.Atoi(w[5])
		f.st.Servers = append(f.st.Servers, haproxy.Server{Backend: be, Name: name, Addr: w[3], Weight: int32(weight), Maint: true})
	case i < 0:
		return fmt.Errorf("%q: no such server", s.Command)
	case verb == "enable server", verb == "disable server":
		f.st.Servers[i].Maint = w[0] == "disable"
	case verb == "del server" && f.st.Servers[i].Maint && f.st.Servers[i].InFlight == 0:
		f.st.Servers = append(f.st.Servers[:i], f.st.Servers[i+1:]...)
	case verb == "set server" && w[3] == "weight":
		weight, _ := strconv.Atoi(w[4])
		f.st.Servers[i].Weight = int32(weight)
	case verb == "set server" && w[3] == "addr":
		f.st.Servers[i].Addr = w[4] + ":" + w[6]
	default:
		return fmt.Errorf("%q refused", s.Command)
	}
	return nil
}

// serving: some server of backend be takes new requests.
func (f *fake) serving(be string) bool {
	for _, srv := range f.st.Servers {
		if srv.Backend == be && !srv.Maint && srv.Weight > 0 {
			return true
		}
	}
	return false
}

// TestPlanConverges: from 3,000 random states (1 to 4 cohorts at rollout weights, some
// in maintenance, some serving requests, some with an old address, a random pin) to a
// random split, the plans of at most four rounds bring HAProxy to the split once
// nothing is in flight, every command one HAProxy takes, and no step ever leaves the
// split backend without a server taking requests while the split asks for one.
func TestPlanConverges(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	hashes := []string{"00000001", "00000002", "00000003", "00000004"}
	randomSplit := func() proxy.Split {
		var s proxy.Split
		left := int32(100)
		for i, h := range hashes {
			if rng.IntN(2) == 0 && i < 3 {
				continue
			}
			// Weights of rollouts: 0 (draining, or not yet), a step, or all.
			w := min(left, []int32{0, 0, 10, 30, 100}[rng.IntN(5)])
			if i == 3 {
				w = left
			}
			left -= w
			s.Cohorts = append(s.Cohorts, proxy.SplitCohort{Hash: h, Address: "10.0.0." + strconv.Itoa(1+rng.IntN(2)), Port: 8000, Weight: w})
		}
		if rng.IntN(2) == 0 {
			s.HeaderRoute = &proxy.SplitHeaderRoute{Name: "x-canary", Value: strconv.Itoa(rng.IntN(3)), Hash: s.Cohorts[rng.IntN(len(s.Cohorts))].Hash}
		}
		return s
	}
	for i := 0; i < 3000; i++ {
		from, want := randomSplit(), randomSplit()
		f := &fake{st: stateOf(from, nil)}
		for j := range f.st.Servers {
			f.st.Servers[j].Maint = rng.IntN(5) == 0
			f.st.Servers[j].InFlight = int64(rng.IntN(3))
		}
		served := f.serving(haproxy.SplitBackend)
		for round := 0; round < 8; round++ {
			if round == 4 { // what was in flight finished
				for j := range f.st.Servers {
					f.st.Servers[j].InFlight = 0
				}
			}
			for _, s := range haproxy.Plan(f.st, want) {
				if err := f.run(s); err != nil {
					t.Fatalf("state %d, round %d: %v\nfrom %+v\nto %+v", i, round, err, from, want)
				}
				now := f.serving(haproxy.SplitBackend)
				if served && !now && hasWeight(want) {
					t.Fatalf("state %d, round %d: after %q no server of the split backend takes requests", i, round, s.Command)
				}
				served = served || now
			}
		}
		if diff := haproxy.Check(f.st, want); diff != "" {
			t.Fatalf("state %d: not converged: %s\nfrom %+v\nto %+v", i, diff, from, want)
		}
	}
}

func hasWeight(s proxy.Split) bool {
	for _, c := range s.Cohorts {
		if c.Weight > 0 {
			return true
		}
	}
	return false
}
