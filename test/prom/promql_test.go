package prom

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSelectorNames(t *testing.T) {
	cases := map[string]struct {
		q    string
		want []string
	}{
		"a bare selector":                        {`up`, []string{"up"}},
		"a name with colons":                     {`vllm:time_to_first_token_seconds_count`, []string{"vllm:time_to_first_token_seconds_count"}},
		"label names are not read":               {`dgd_rollout_phase{phase="InProgress",namespace=~".*"} == 1`, []string{"dgd_rollout_phase"}},
		"a string with a brace and a name in it": {`x{a="}y{", b='z'}`, []string{"x"}},
		"functions and a range":                  {`histogram_quantile(0.9, sum by (le) (rate(x_bucket[5m])))`, []string{"x_bucket"}},
		"a grouping after the aggregation":       {`sum(rate(x[1d])) by (namespace, name)`, []string{"x"}},
		"vector matching": {`max by (namespace, name) (a) == 1 unless on (namespace, name) sum by (namespace, name) (increase(b[2m])) > 0`,
			[]string{"a", "b"}},
		"group_left with labels": {`a * on (pod) group_left (node) b`, []string{"a", "b"}},
		"or vector(0)":           {`(sum(rate(e[5m])) or vector(0)) / sum(rate(r[5m]))`, []string{"e", "r"}},
		"keywords in capitals":   {`SUM BY (le) (x) AND Y`, []string{"x", "Y"}},
		"numbers and durations":  {`x offset 5m > 1.5e3 + .5 + 0x1f + Inf - NaN`, []string{"x"}},
		"a subquery":             {`max_over_time(rate(x[1m])[10m:30s])`, []string{"x"}},
		"a name matcher":         {`{__name__="x", job="a"} + {__name__=~"y|z"}`, []string{"x", "y|z"}},
		"a comment":              {"x # not_a_metric\n+ y", []string{"x", "y"}},
		"bool":                   {`x > bool 1`, []string{"x"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, SelectorNames(c.q)); diff != "" {
				t.Errorf("SelectorNames(%q) (-want +got):\n%s", c.q, diff)
			}
		})
	}
}
