package planner_test

import (
	"maps"
	"testing"

	"github.com/dgd-rollout/operator/controllers/planner"
)

func TestResolve(t *testing.T) {
	for name, tc := range map[string]struct {
		v     planner.IntOrPercent
		total int32
		up    bool
		want  int32
	}{
		"count as is":                 {num(3), 10, false, 3},
		"negative count is 0":         {num(-2), 10, true, 0},
		"25% of 4 up":                 {pct(25), 4, true, 1},
		"25% of 2 up rounds up":       {pct(25), 2, true, 1},
		"25% of 2 down rounds down":   {pct(25), 2, false, 0},
		"33% of 10 down":              {pct(33), 10, false, 3},
		"33% of 10 up":                {pct(33), 10, true, 4},
		"100% of 7":                   {pct(100), 7, false, 7},
		"200% surge of 3":             {pct(200), 3, true, 6},
		"percent of 0 is 0":           {pct(50), 0, true, 0},
		"percent of negative is 0":    {pct(50), -4, true, 0},
		"huge percent clamps":         {pct(2147483647), 2147483647, true, 2147483647},
		"zero percent rounds to 0":    {pct(0), 9, true, 0},
		"1% of 64 up is 1, down is 0": {pct(1), 64, true, 1},
	} {
		if got := planner.Resolve(tc.v, tc.total, tc.up); got != tc.want {
			t.Errorf("%s: got %d want %d", name, got, tc.want)
		}
	}
}

func TestResolveBudgets(t *testing.T) {
	for name, tc := range map[string]struct {
		s           planner.ServiceSpec
		surge, unav int32
	}{
		"defaults on 4":                {svc("w", 4, pct(25), pct(25)), 1, 1},
		"defaults on 2":                {svc("w", 2, pct(25), pct(25)), 1, 0},
		"defaults on 1":                {svc("w", 1, pct(25), pct(25)), 1, 0},
		"both zero counts: surge 1":    {svc("w", 3, num(0), num(0)), 1, 0},
		"both round to zero: surge 1":  {svc("w", 3, pct(0), pct(10)), 1, 0},
		"zero replicas keep 0/0":       {svc("w", 0, num(0), num(0)), 0, 0},
		"surge 0 with unavailable":     {svc("w", 8, num(0), pct(25)), 0, 2},
		"negative replicas count as 0": {svc("w", -3, pct(50), pct(50)), 0, 0},
	} {
		if s, u := planner.ResolveBudgets(tc.s); s != tc.surge || u != tc.unav {
			t.Errorf("%s: got (%d,%d) want (%d,%d)", name, s, u, tc.surge, tc.unav)
		}
	}
}

func TestPartitionCounts(t *testing.T) {
	services := func(rs ...int32) []planner.ServiceSpec {
		var out []planner.ServiceSpec
		for i, r := range rs {
			out = append(out, planner.ServiceSpec{Name: fuzzNames[i], Replicas: r})
		}
		return out
	}
	p := func(v planner.IntOrPercent) *planner.IntOrPercent { return &v }
	for name, tc := range map[string]struct {
		spec planner.Spec
		want map[string]int32
	}{
		"nil holds nothing":                 {planner.Spec{Services: services(4, 2)}, map[string]int32{"prefill": 0, "decode": 0}},
		"50% of 4/2":                        {planner.Spec{Services: services(4, 2), Partition: p(pct(50))}, map[string]int32{"prefill": 2, "decode": 1}},
		"25% of 8/4":                        {planner.Spec{Services: services(8, 4), Partition: p(pct(25))}, map[string]int32{"prefill": 2, "decode": 1}},
		"10% of 8/2 clamps up to 1":         {planner.Spec{Services: services(8, 2), Partition: p(pct(10))}, map[string]int32{"prefill": 1, "decode": 1}},
		"90% of 8/2 clamps down to R-1":     {planner.Spec{Services: services(8, 2), Partition: p(pct(90))}, map[string]int32{"prefill": 7, "decode": 1}},
		"count 2 of R_max 8 is 25%":         {planner.Spec{Services: services(8, 4), Partition: p(num(2))}, map[string]int32{"prefill": 2, "decode": 1}},
		"count 3 of R_max 8, half up":       {planner.Spec{Services: services(8, 4), Partition: p(num(3))}, map[string]int32{"prefill": 3, "decode": 2}},
		"count >= R_max holds everything":   {planner.Spec{Services: services(8, 4), Partition: p(num(9))}, map[string]int32{"prefill": 8, "decode": 4}},
		"100% holds everything":             {planner.Spec{Services: services(3, 0), Partition: p(pct(100))}, map[string]int32{"prefill": 3, "decode": 0}},
		"R=1 cannot split: hold everything": {planner.Spec{Services: services(4, 1), Partition: p(pct(50))}, map[string]int32{"prefill": 4, "decode": 1}},
		"0% holds nothing":                  {planner.Spec{Services: services(4, 1), Partition: p(pct(0))}, map[string]int32{"prefill": 0, "decode": 0}},
	} {
		if got := planner.PartitionCounts(tc.spec); !maps.Equal(got, tc.want) {
			t.Errorf("%s: got %v want %v", name, got, tc.want)
		}
	}
}
