package analysis

import (
	"bytes"
	"fmt"
	"strings"
	"text/template"
)

// Vars is what a query template sees (AnalysisMetric.Query): the DGD and the two
// revisions an analysis compares.
type Vars struct {
	// Namespace and Name are the DGD's.
	Namespace, Name string
	// Canary is the update revision (the one being rolled out), Stable the revision
	// every worker was on before the rollout.
	Canary, Stable Revision
}

// Revision is one worker revision as a query names it.
type Revision struct {
	// Revision is its ControllerRevision number.
	Revision int64
	// Hash is its worker hash (the suffix of its workloads and Dynamo namespace).
	Hash string
	// Namespace is its workers' effective Dynamo namespace, <ns>-<dgd>-<hash>: the
	// dynamo_namespace label of the engine metrics Dynamo re-exports (vllm:*).
	Namespace string
	// MetricsNamespace is Namespace as the Dynamo runtime's own metrics
	// (dynamo_component_*) label it: every character other than a letter, digit or '_'
	// becomes '_' (lib/runtime/src/metrics.rs, sanitize_prometheus_label).
	MetricsNamespace string
	// Workloads are its workload names by service.
	Workloads map[string]string
}

// NewRevision fills a Revision, MetricsNamespace from namespace.
func NewRevision(number int64, hash, namespace string, workloads map[string]string) Revision {
	return Revision{Revision: number, Hash: hash, Namespace: namespace, MetricsNamespace: SanitizeLabel(namespace), Workloads: workloads}
}

// SanitizeLabel is a label value as the Dynamo runtime writes it on its metrics:
// every character outside [a-zA-Z0-9_] replaced with '_'.
func SanitizeLabel(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			return r
		}
		return '_'
	}, s)
}

// Render expands a query template with vars; a field or map key that does not exist
// is an error.
func Render(query string, vars Vars) (string, error) {
	t, err := template.New("query").Option("missingkey=error").Parse(query)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, vars); err != nil {
		return "", err
	}
	return b.String(), nil
}

// CheckQuery reports whether query is a template Render can expand, trying it on
// sample revisions with the given worker services.
func CheckQuery(query string, services []string) error {
	w := map[string]string{}
	for _, s := range services {
		w[s] = "dgd-" + s + "-0123456789"
	}
	r := NewRevision(2, "0123abcd", "ns-dgd-0123abcd", w)
	if _, err := Render(query, Vars{Namespace: "ns", Name: "dgd", Canary: r, Stable: r}); err != nil {
		return fmt.Errorf("not a valid query template: %w", err)
	}
	return nil
}
