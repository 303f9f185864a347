package analysis

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
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

// Query templates are placeholder substitution, as Argo Rollouts' AnalysisTemplates
// ({{args.name}}, utils/template/template.go resolve): every `{{ tag }}` of the query is
// replaced by the value of its tag, whitespace around the tag ignored, and a tag with
// no value is an error naming it. Nothing else runs: no Go template action (range,
// if, with, define, template...), no function, no pipeline, so a query costs one pass
// over its at most 4,096 characters whatever it contains, and its expansion is capped
// at MaxExpandedQuery bytes. (Until issue 23 queries were Go text/template programs: a
// single `{{range 30000000}}{{end}}` held half a core of the operator on every pass.)
//
// The tags are the fields that template had, spelled as it spelled them, so every
// query written for it expands alike:
//
//	{{.Namespace}} {{.Name}}                         the DGD's namespace and name
//	{{.Canary.Namespace}} {{.Stable.Namespace}}      effective Dynamo namespaces
//	{{.Canary.MetricsNamespace}} (and .Stable)       the same, as dynamo_component_* label them
//	{{.Canary.Hash}} {{.Canary.Revision}} (and .Stable)
//	{{index .Canary.Workloads "decode"}}             a worker service's workload (also
//	{{.Canary.Workloads.decode}})                    written as a field, and for .Stable)
//
// Go's trim markers ({{- .Name -}}) are accepted and trim nothing: whitespace does not
// matter to PromQL. Arguments (issue 27's AnalysisTemplates) are more tags of the same
// map: Values(vars) plus "args.<name>" for each argument, as Argo names them.

// MaxExpandedQuery caps a query after substitution, in bytes. A query is at most
// 4,096 characters (the CRD) and every value the operator substitutes is a name of at
// most a few hundred, so only a query made of placeholders, or an argument's value,
// comes near it; Prometheus takes the query in a request body.
const MaxExpandedQuery = 16 << 10

const (
	openTag  = "{{"
	closeTag = "}}"
)

// Values are the tags of a query template with their values (see the package's
// template rules above).
func Values(v Vars) map[string]string {
	out := map[string]string{".Namespace": v.Namespace, ".Name": v.Name}
	for _, r := range []struct {
		prefix string
		rev    Revision
	}{{".Canary", v.Canary}, {".Stable", v.Stable}} {
		out[r.prefix+".Namespace"] = r.rev.Namespace
		out[r.prefix+".MetricsNamespace"] = r.rev.MetricsNamespace
		out[r.prefix+".Hash"] = r.rev.Hash
		out[r.prefix+".Revision"] = strconv.FormatInt(r.rev.Revision, 10)
		for svc, w := range r.rev.Workloads {
			out[indexTag(r.prefix+".Workloads", svc)] = w
			out[r.prefix+".Workloads."+svc] = w
		}
	}
	return out
}

func indexTag(field, key string) string { return "index " + field + " " + strconv.Quote(key) }

// normalize is the tag of `{{ tag }}` as Values keys it: trimmed of whitespace and
// trim markers, an index call's key unquoted and quoted again (so `index .Canary.Workloads
// 'x'`-style spellings Go accepts, "..." and `...`, meet one key).
func normalize(tag string) string {
	t := strings.TrimSpace(tag)
	if strings.HasPrefix(t, "- ") || t == "-" {
		t = strings.TrimSpace(t[1:])
	}
	if strings.HasSuffix(t, " -") {
		t = strings.TrimSpace(t[:len(t)-1])
	}
	if f := strings.Fields(t); len(f) == 3 && f[0] == "index" {
		if key, err := strconv.Unquote(f[2]); err == nil {
			return indexTag(f[1], key)
		}
	}
	return t
}

// Expand substitutes the value of every `{{ tag }}` of query from values. It errs,
// naming the tag, on a tag with no value (a Go template action such as `range` is one),
// on an opening `{{` without its `}}`, and once the result would pass MaxExpandedQuery
// bytes (it stops there: nothing larger is ever built). It reads query once.
func Expand(query string, values map[string]string) (string, error) {
	var b strings.Builder
	rest := query
	for {
		i := strings.Index(rest, openTag)
		if i < 0 {
			if b.Len()+len(rest) > MaxExpandedQuery {
				return "", tooLong(b.Len() + len(rest))
			}
			b.WriteString(rest)
			return b.String(), nil
		}
		j := strings.Index(rest[i+len(openTag):], closeTag)
		if j < 0 {
			return "", fmt.Errorf("%s at offset %d has no closing %s", openTag, len(query)-len(rest)+i, closeTag)
		}
		tag := rest[i+len(openTag) : i+len(openTag)+j]
		v, ok := values[normalize(tag)]
		if !ok {
			return "", unknownTag(tag, values)
		}
		if b.Len()+i+len(v) > MaxExpandedQuery {
			return "", tooLong(b.Len() + i + len(v))
		}
		b.WriteString(rest[:i])
		b.WriteString(v)
		rest = rest[i+len(openTag)+j+len(closeTag):]
	}
}

func tooLong(n int) error {
	return fmt.Errorf("the query is over %d bytes once its placeholders are substituted (%d so far)", MaxExpandedQuery, n)
}

// unknownTag names tag and the tags there are (without the workload aliases, which
// only repeat the index form).
func unknownTag(tag string, values map[string]string) error {
	var known []string
	for k := range values {
		if strings.Contains(k, ".Workloads.") {
			continue
		}
		known = append(known, openTag+k+closeTag)
	}
	sort.Strings(known)
	const most = 12
	if len(known) > most {
		known = append(known[:most], "...")
	}
	shown := tag
	if len(shown) > 64 {
		shown = shown[:64] + "..."
	}
	return fmt.Errorf("unknown placeholder %s%s%s: a query is placeholder substitution, not a Go template (no range, if, with or functions); it may use %s",
		openTag, shown, closeTag, strings.Join(known, ", "))
}

// ArgPrefix starts the tag of an argument: {{args.<name>}}, as Argo Rollouts spells it.
const ArgPrefix = "args."

// ArgValues are the tags of args ({{args.<name>}}) with their values.
func ArgValues(args map[string]string) map[string]string {
	out := make(map[string]string, len(args))
	for k, v := range args {
		out[ArgPrefix+k] = v
	}
	return out
}

// Render expands a query template with vars and args (Expand over Values(vars) and
// ArgValues(args), in one pass: an argument's value is not expanded again).
func Render(query string, vars Vars, args map[string]string) (string, error) {
	values := Values(vars)
	for k, v := range args {
		values[ArgPrefix+k] = v
	}
	return Expand(query, values)
}

// CheckQuery reports whether query is a template Render can expand with args, trying
// it on sample revisions with the given worker services. Like Expand, it costs one pass
// over the query; the cap on its expansion applies with the arguments' values.
func CheckQuery(query string, services []string, args map[string]string) error {
	w := map[string]string{}
	for _, s := range services {
		w[s] = "dgd-" + s + "-0123456789"
	}
	r := NewRevision(2, "0123abcd", "ns-dgd-0123abcd", w)
	if _, err := Render(query, Vars{Namespace: "ns", Name: "dgd", Canary: r, Stable: r}, args); err != nil {
		return fmt.Errorf("not a valid query template: %w", err)
	}
	return nil
}
