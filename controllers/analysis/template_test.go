package analysis

import (
	"strings"
	"testing"
)

func sampleVars() Vars {
	return Vars{Namespace: "prod", Name: "llm",
		Canary: NewRevision(3, "bbbb0000", "prod-llm-bbbb0000", map[string]string{"decode": "llm-decode-bbbb0000"}),
		Stable: NewRevision(2, "aaaa0000", "prod-llm-aaaa0000", map[string]string{"decode": "llm-decode-aaaa0000"})}
}

// TestExpandPlaceholders: every placeholder the samples, docs/analysis.md and the
// Go-template engine before it offered expands as it did, in each spelling Go accepted.
func TestExpandPlaceholders(t *testing.T) {
	vars := sampleVars()
	for q, want := range map[string]string{
		`rate(x{dynamo_namespace="{{.Canary.MetricsNamespace}}"}[1m]) / rate(x{dynamo_namespace="{{.Stable.Namespace}}"}[1m]) {{index .Canary.Workloads "decode"}} {{.Name}}`: `rate(x{dynamo_namespace="prod_llm_bbbb0000"}[1m]) / rate(x{dynamo_namespace="prod-llm-aaaa0000"}[1m]) llm-decode-bbbb0000 llm`,
		`{{.Namespace}}/{{.Name}}`: `prod/llm`,
		`{{.Canary.Hash}} {{.Canary.Revision}} {{.Stable.Hash}} {{.Stable.Revision}}`: `bbbb0000 3 aaaa0000 2`,
		`{{ .Canary.Namespace }}|{{- .Stable.MetricsNamespace -}}`:                    `prod-llm-bbbb0000|prod_llm_aaaa0000`,
		"{{index .Stable.Workloads `decode`}}":                                        `llm-decode-aaaa0000`,
		`{{index  .Canary.Workloads  "decode" }}`:                                     `llm-decode-bbbb0000`,
		`{{.Canary.Workloads.decode}}`:                                                `llm-decode-bbbb0000`,
		`sum(up{job="x"}) by (pod) {}`:                                                `sum(up{job="x"}) by (pod) {}`,
		`{a="}}"}`:                                                                    `{a="}}"}`,
	} {
		got, err := Render(q, vars, nil)
		if err != nil || got != want {
			t.Errorf("Render(%q) = %q, %v; want %q", q, got, err, want)
		}
	}
	// Issue 27's arguments are more tags of the same map, as Argo names them.
	values := Values(vars)
	values["args.service"] = "decode"
	if got, err := Expand(`up{svc="{{ args.service }}",ns="{{.Namespace}}"}`, values); err != nil || got != `up{svc="decode",ns="prod"}` {
		t.Errorf("args: %q, %v", got, err)
	}
}

// TestExpandRefuses: what is not a known placeholder errs at once, naming it: Go
// template actions (the loops of issue 23 among them), unknown fields and services,
// an unclosed placeholder; nothing is executed.
func TestExpandRefuses(t *testing.T) {
	vars := sampleVars()
	for q, want := range map[string]string{
		`{{range 30000000}}{{end}}`:                                 "unknown placeholder {{range 30000000}}",
		`{{range $i := 30000000}}{{range 30000000}}x{{end}}{{end}}`: "unknown placeholder {{range $i := 30000000}}",
		`{{define "a"}}{{template "a"}}{{end}}{{template "a"}}`:     "unknown placeholder",
		`{{.Canary.Nope}}`:                                          "unknown placeholder {{.Canary.Nope}}",
		`{{index .Canary.Workloads "prefill"}}`:                     `unknown placeholder {{index .Canary.Workloads "prefill"}}`,
		`{{printf "%s" .Name}}`:                                     "not a Go template",
		`up{x="{{.Canary.Namespace"}`:                               "has no closing }}",
		`{{if .Name}}{{.Name}}{{end}}`:                              "unknown placeholder {{if .Name}}",
		`{{}}`:                                                      "unknown placeholder {{}}",
		`{{` + strings.Repeat("x", 200) + `}}`:                      "...",
	} {
		_, err := Render(q, vars, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Render(%q): %v, want an error containing %q", q, err, want)
		}
	}
	if err := CheckQuery(`{{range 30000000}}{{end}}`, []string{"decode"}, nil); err == nil || !strings.Contains(err.Error(), "not a valid query template") {
		t.Errorf("CheckQuery of a loop: %v", err)
	}
	if err := CheckQuery(`up{x="{{index .Canary.Workloads "prefill"}}"}`, []string{"prefill"}, nil); err != nil {
		t.Errorf("CheckQuery: %v", err)
	}
}

// TestExpandCap: the expansion stops at MaxExpandedQuery bytes, without building the
// rest; a query just under the cap expands whole.
func TestExpandCap(t *testing.T) {
	values := map[string]string{"big": strings.Repeat("v", 1000)}
	q := strings.Repeat("{{big}}", 4096/7)
	if _, err := Expand(q, values); err == nil || !strings.Contains(err.Error(), "over 16384 bytes") {
		t.Errorf("a 585 kB expansion: %v", err)
	}
	q = strings.Repeat("{{big}}", MaxExpandedQuery/1000)
	if got, err := Expand(q, values); err != nil || len(got) != MaxExpandedQuery/1000*1000 {
		t.Errorf("under the cap: %d bytes, %v", len(got), err)
	}
	if _, err := Expand(strings.Repeat("x", MaxExpandedQuery+1), nil); err == nil {
		t.Error("a plain query over the cap expanded")
	}
}

// BenchmarkExpandLoop is the CPU a looping template costs a pass now: one scan to the
// first unknown placeholder (issue 23 measured 2.3 s per pass under text/template).
func BenchmarkExpandLoop(b *testing.B) {
	vars := sampleVars()
	q := `sum(rate(x{ns="{{.Canary.Namespace}}"}[1m])) {{range 30000000}}{{range 30000000}}{{end}}{{end}}`
	for b.Loop() {
		if _, err := Render(q, vars, nil); err == nil {
			b.Fatal("a loop expanded")
		}
	}
}

// BenchmarkExpandSample is a sample query's expansion (config/samples/canary-analysis.yaml).
func BenchmarkExpandSample(b *testing.B) {
	vars := sampleVars()
	q := `sum(rate(dynamo_component_errors_total{dynamo_namespace="{{.Canary.MetricsNamespace}}",dynamo_endpoint="generate"}[30s])) / sum(rate(dynamo_component_requests_total{dynamo_namespace="{{.Canary.MetricsNamespace}}",dynamo_endpoint="generate"}[30s]))`
	for b.Loop() {
		if _, err := Render(q, vars, nil); err != nil {
			b.Fatal(err)
		}
	}
}
