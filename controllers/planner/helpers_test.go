package planner_test

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dgd-rollout/operator/controllers/planner"
)

func pct(v int32) planner.IntOrPercent { return planner.IntOrPercent{Value: v, Percent: true} }
func num(v int32) planner.IntOrPercent { return planner.IntOrPercent{Value: v} }

// svc builds a worker service; UnreadyFirst as a Deployment.
func svc(name string, r int32, surge, unav planner.IntOrPercent) planner.ServiceSpec {
	role := planner.RoleWorker
	if strings.HasPrefix(name, "prefill") {
		role = planner.RolePrefill
	} else if strings.HasPrefix(name, "decode") {
		role = planner.RoleDecode
	}
	return planner.ServiceSpec{Name: name, Role: role, Replicas: r, MaxSurge: surge, MaxUnavailable: unav, UnreadyFirst: true}
}

// steady returns ready workloads of revision rev holding counts (service=count pairs).
func steady(rev int64, counts ...any) []planner.Workload {
	var out []planner.Workload
	for i := 0; i < len(counts); i += 2 {
		n := int32(counts[i+1].(int))
		out = append(out, planner.Workload{Service: counts[i].(string), Revision: rev, Spec: n, Current: n, Ready: n})
	}
	return out
}

// render shows a plan's targets as "1[decode=2 prefill=3] 2[decode=1 prefill=2]",
// revisions ascending, services sorted, with the phase when it is not InProgress.
func render(p planner.Plan) string {
	byRev := map[int64][]string{}
	var revs []int64
	for _, t := range p.Targets {
		if _, ok := byRev[t.Revision]; !ok {
			revs = append(revs, t.Revision)
		}
		byRev[t.Revision] = append(byRev[t.Revision], fmt.Sprintf("%s=%d", t.Service, t.Replicas))
	}
	sort.Slice(revs, func(a, b int) bool { return revs[a] < revs[b] })
	var parts []string
	for _, r := range revs {
		sort.Strings(byRev[r])
		parts = append(parts, fmt.Sprintf("%d[%s]", r, strings.Join(byRev[r], " ")))
	}
	s := strings.Join(parts, " ")
	if p.Phase != planner.PhaseInProgress {
		s += " " + string(p.Phase)
	}
	return s
}

func renderAll(plans []planner.Plan) []string {
	out := make([]string, len(plans))
	for i, p := range plans {
		out[i] = render(p)
	}
	return out
}
