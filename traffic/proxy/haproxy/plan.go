package haproxy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dgd-rollout/operator/traffic/proxy"
)

// Step is one change to a running HAProxy: a runtime API command, or the pin ACL's
// atomic replacement (ReplacePin: "prepare acl", "add acl @<ver>", "commit acl
// @<ver>", which the agent runs in turn since the second needs the first's answer).
type Step struct {
	Command string
	// ReplacePin replaces the pin ACL's entries with Pattern ("" leaves it empty).
	ReplacePin bool
	Pattern    string
	// MayFail: HAProxy may refuse the command for now, and the next pass retries it
	// ("del server" while the server's idle connections are being purged).
	MayFail bool
}

// Plan is the steps that turn st into want, in an order that never leaves a backend
// without a server able to take a request: new servers and every weight that rises
// first, then the pin pattern (once its cohort's pin server has its weight), then every
// weight that falls; last, servers of cohorts no longer wanted drain (weight 0), then,
// once they serve nothing, go into maintenance and are deleted ("del server" accepts
// only a server in maintenance without connections, management.txt "del server").
// An empty plan means st is want, save deletions HAProxy refused.
func Plan(st State, want proxy.Split) []Step {
	var adds, raises, lowers []Step
	wanted := map[string]bool{}
	for _, c := range want.Cohorts {
		wanted[ServerName(c.Hash)] = true
		for _, be := range []string{SplitBackend, PinBackend} {
			a, r, l := serverSteps(st, be, c, weightIn(want, be, c))
			adds, raises, lowers = append(adds, a...), append(raises, r...), append(lowers, l...)
		}
	}
	steps := append(adds, raises...)
	if pin := PinPattern(want); !slices.Equal(st.Pins, pins(pin)) {
		steps = append(steps, Step{ReplacePin: true, Pattern: pin})
	}
	drain, remove := removalSteps(st, wanted)
	steps = append(steps, lowers...)
	steps = append(steps, drain...)
	return append(steps, remove...)
}

func weightIn(s proxy.Split, be string, c proxy.SplitCohort) int32 {
	if be == PinBackend {
		return PinWeight(s, c.Hash)
	}
	return c.Weight
}

func pins(pattern string) []string {
	if pattern == "" {
		return nil
	}
	return []string{pattern}
}

// serverSteps bring one cohort's server in backend be to weight w.
func serverSteps(st State, be string, c proxy.SplitCohort, w int32) (add, raise, lower []Step) {
	id := be + "/" + ServerName(c.Hash)
	srv, ok := st.Server(be, ServerName(c.Hash))
	if !ok {
		return []Step{{Command: fmt.Sprintf("add server %s %s weight %d", id, Address(c), w)},
			{Command: "enable server " + id}}, nil, nil
	}
	if srv.Addr != Address(c) {
		add = append(add, Step{Command: fmt.Sprintf("set server %s addr %s port %d", id, c.Address, c.Port)})
	}
	if srv.Maint {
		add = append(add, Step{Command: "enable server " + id})
	}
	set := Step{Command: fmt.Sprintf("set server %s weight %d", id, w)}
	switch {
	case srv.Weight < w:
		raise = append(raise, set)
	case srv.Weight > w:
		lower = append(lower, set)
	}
	return add, raise, lower
}

// removalSteps drain and delete the servers of cohorts not wanted: weight 0 in both
// backends first; once both serve nothing, maintenance; once in maintenance without
// idle connections, deletion.
func removalSteps(st State, wanted map[string]bool) (drain, remove []Step) {
	inFlight := map[string]int64{}
	drained := map[string]bool{}
	for _, srv := range st.Servers {
		if wanted[srv.Name] {
			continue
		}
		inFlight[srv.Name] += srv.InFlight
		if _, seen := drained[srv.Name]; !seen {
			drained[srv.Name] = true
		}
		if !srv.Maint && srv.Weight != 0 {
			drained[srv.Name] = false
			drain = append(drain, Step{Command: fmt.Sprintf("set server %s/%s weight 0", srv.Backend, srv.Name)})
		}
	}
	for _, srv := range st.Servers {
		if wanted[srv.Name] || !drained[srv.Name] || inFlight[srv.Name] > 0 {
			continue
		}
		id := srv.Backend + "/" + srv.Name
		switch {
		case !srv.Maint:
			remove = append(remove, Step{Command: "disable server " + id})
		case srv.Idle == 0:
			remove = append(remove, Step{Command: "del server " + id, MayFail: true})
		}
	}
	return drain, remove
}

// Check says how st differs from want ("" when it is want): every wanted cohort's
// server in both backends, in service at its address and weight; every other server
// at weight 0 or in maintenance; the pin ACL holding exactly the header route's
// pattern.
func Check(st State, want proxy.Split) string {
	var diffs []string
	wanted := map[string]bool{}
	for _, c := range want.Cohorts {
		wanted[ServerName(c.Hash)] = true
		for _, be := range []string{SplitBackend, PinBackend} {
			w := weightIn(want, be, c)
			srv, ok := st.Server(be, ServerName(c.Hash))
			switch {
			case !ok:
				diffs = append(diffs, fmt.Sprintf("no server %s/%s", be, ServerName(c.Hash)))
			case srv.Maint || srv.Addr != Address(c) || srv.Weight != w:
				diffs = append(diffs, fmt.Sprintf("server %s/%s is at %s weight %d maintenance %t, not %s weight %d",
					be, srv.Name, srv.Addr, srv.Weight, srv.Maint, Address(c), w))
			}
		}
	}
	for _, srv := range st.Servers {
		if !wanted[srv.Name] && !srv.Maint && srv.Weight != 0 {
			diffs = append(diffs, fmt.Sprintf("server %s/%s of a cohort removed still has weight %d", srv.Backend, srv.Name, srv.Weight))
		}
	}
	if pin := PinPattern(want); !slices.Equal(st.Pins, pins(pin)) {
		diffs = append(diffs, fmt.Sprintf("pin ACL holds %q, not %q", st.Pins, pin))
	}
	return strings.Join(diffs, "; ")
}

// Observe is st by cohort: the weight in effect in the split backend (0 in
// maintenance), the requests in flight in both backends, whether the cohort is being
// removed (not in want); and the cohort the header route sends to ("" when the pin ACL
// is empty).
func Observe(st State, want proxy.Split) (cohorts map[string]proxy.CohortReport, pinned string) {
	cohorts = map[string]proxy.CohortReport{}
	wanted := map[string]bool{}
	for _, c := range want.Cohorts {
		wanted[c.Hash] = true
	}
	for _, srv := range st.Servers {
		hash, ok := strings.CutPrefix(srv.Name, "c-")
		if !ok {
			continue
		}
		r := cohorts[hash]
		r.InFlight += srv.InFlight
		r.Removing = !wanted[hash]
		if srv.Backend == SplitBackend && !srv.Maint {
			r.Weight = srv.Weight
		}
		if srv.Backend == PinBackend && !srv.Maint && srv.Weight > 0 && len(st.Pins) > 0 {
			pinned = hash
		}
		cohorts[hash] = r
	}
	return cohorts, pinned
}
