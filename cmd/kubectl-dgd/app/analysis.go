package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/controllers/decide"
)

// PrometheusURLEnv is the environment variable kubectl dgd analysis run reads the
// Prometheus URL from when --prometheus-url is not given.
const PrometheusURLEnv = "DGD_PROMETHEUS_URL"

// newAnalysisCommand groups the analysis verbs.
func newAnalysisCommand(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "analysis SUBCOMMAND",
		Short: "Try analysis templates (AnalysisTemplate, ClusterAnalysisTemplate) against Prometheus",
	}
	cmd.AddCommand(newAnalysisRunCommand(c))
	return cmd
}

// analysisRun is what kubectl dgd analysis run measures: a template, the Dynamo
// namespaces of the revisions its queries compare, and the values of its arguments.
type analysisRun struct {
	ref            v1alpha1.AnalysisTemplateRef
	canary, stable string
	args           []v1alpha1.AnalysisArgument
}

func newAnalysisRunCommand(c *cli) *cobra.Command {
	var (
		run     analysisRun
		args    []string
		url     string
		connect analysis.PrometheusClient
	)
	cmd := &cobra.Command{
		Use:     "run TEMPLATE [--cluster-scope] --canary-namespace=DYNAMO_NS [--stable-namespace=DYNAMO_NS] [--arg NAME=VALUE]...",
		Short:   "Measure an analysis template's metrics once, as an analysis step would",
		Long:    analysisRunLong,
		Example: analysisRunExample,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("%s needs exactly one analysis template name, got %d arguments (see --help)", cmd.CommandPath(), len(args))
			}
			return nil
		},
		ValidArgsFunction: c.completeTemplate,
		RunE: func(cmd *cobra.Command, names []string) error {
			run.ref.TemplateName = names[0]
			return c.analysisRun(cmd, run, args, url, connect)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&run.ref.ClusterScope, "cluster-scope", false, "TEMPLATE is a ClusterAnalysisTemplate")
	f.StringVar(&run.canary, "canary-namespace", "", "Dynamo namespace of the canary revision's workers ({{.Canary.Namespace}}, {{.Canary.MetricsNamespace}})")
	f.StringVar(&run.stable, "stable-namespace", "", "Dynamo namespace of the stable revision's workers ({{.Stable.Namespace}}, {{.Stable.MetricsNamespace}})")
	f.StringArrayVar(&args, "arg", nil, "NAME=VALUE: a value of the template's argument {{args.NAME}}, as a step's args pass it (repeat for more)")
	f.StringVar(&url, "prometheus-url", "", "Prometheus to query, e.g. http://prometheus.monitoring:9090 (default: $"+PrometheusURLEnv+")")
	f.StringVar(&connect.BearerTokenFile, "prometheus-bearer-token-file", "", analysis.UsageBearerTokenFile)
	f.StringVar(&connect.CAFile, "prometheus-ca-file", "", analysis.UsageCAFile)
	f.BoolVar(&connect.InsecureSkipVerify, "prometheus-insecure-skip-verify", false, analysis.UsageInsecureSkipVerify)
	return cmd
}

// analysisRun parses the --arg values, connects to Prometheus (--prometheus-url, else
// $DGD_PROMETHEUS_URL, through the operator's TLS and token transport) and to the
// cluster, and runs the template once.
func (c *cli) analysisRun(cmd *cobra.Command, run analysisRun, args []string, url string, connect analysis.PrometheusClient) error {
	var err error
	if run.args, err = parseArgs(args); err != nil {
		return err
	}
	url = cmp.Or(url, os.Getenv(PrometheusURLEnv))
	if url == "" {
		return fmt.Errorf("no Prometheus to query: pass --prometheus-url or set %s", PrometheusURLEnv)
	}
	rt, err := connect.Transport()
	if err != nil {
		return err
	}
	q, err := analysis.NewPrometheusWith(url, rt)
	if err != nil {
		return err
	}
	s, err := c.connect()
	if err != nil {
		return err
	}
	return s.runAnalysis(cmd.Context(), c.streams.Out, c.streams.ErrOut, run, q)
}

// analysisRunLong and analysisRunExample are the help of kubectl dgd analysis run.
const (
	analysisRunLong = "Read the AnalysisTemplate TEMPLATE of the namespace (or, with --cluster-scope, the\n" +
		"ClusterAnalysisTemplate), resolve its metrics and arguments as the operator does for an\n" +
		"analysis step that references it (the --arg values are the step's args, over the\n" +
		"template's defaults), run each metric's query once against Prometheus, and judge the\n" +
		"value with its successCondition and failureCondition. Prints, per metric, its verdict\n" +
		"(Successful, Failed, Inconclusive, or Error with the reason), its value and its query\n" +
		"as sent. Exits non-zero unless every metric is Successful: what would not pass a step\n" +
		"does not pass here.\n\n" +
		"The queries' placeholders are filled from the flags: {{.Canary.Namespace}} and\n" +
		"{{.Canary.MetricsNamespace}} from --canary-namespace (a worker revision's Dynamo\n" +
		"namespace: <namespace>-<dgd>-<hash>, dots of the DGD's name made dashes, with the hash\n" +
		"kubectl dgd get prints for the revision; MetricsNamespace is it sanitized as the\n" +
		"dynamo_component_* metrics label it), {{.Stable.*}} alike from\n" +
		"--stable-namespace, {{.Namespace}} from -n, {{args.NAME}} from --arg and the\n" +
		"template's defaults. A query naming what only a DGD's revision knows (its name, a\n" +
		"hash, a revision number, a workload) is an Error.\n\n" +
		"Prometheus is --prometheus-url, else $" + PrometheusURLEnv + "; the TLS and token flags are\n" +
		"the operator's own."
	analysisRunExample = "  kubectl dgd analysis run error-rate -n team-a --canary-namespace=team-a-vllm-disagg-5d4c8b7f \\\n" +
		"      --arg max-error-rate=0.05 --prometheus-url=http://prometheus.monitoring:9090\n" +
		"  DGD_PROMETHEUS_URL=http://localhost:9090 kubectl dgd analysis run latency --cluster-scope \\\n" +
		"      --canary-namespace=team-a-vllm-disagg-5d4c8b7f --stable-namespace=team-a-vllm-disagg-7b6f5d4c"
)

// parseArgs reads --arg NAME=VALUE flags (VALUE may be empty, or hold '=' and ',').
func parseArgs(flags []string) ([]v1alpha1.AnalysisArgument, error) {
	var out []v1alpha1.AnalysisArgument
	seen := map[string]bool{}
	for _, a := range flags {
		name, value, ok := strings.Cut(a, "=")
		switch {
		case !ok || name == "":
			return nil, fmt.Errorf("--arg %q: want NAME=VALUE", a)
		case seen[name]:
			return nil, fmt.Errorf("--arg %s is given twice", name)
		}
		seen[name] = true
		out = append(out, v1alpha1.AnalysisArgument{Name: name, Value: &value})
	}
	return out, nil
}

// runAnalysis measures run's template once through q and prints each metric's verdict
// to out. The metrics are the operator's for an analysis step that references the
// template alone with run's args (decide.AnalysisMetrics: the same defaults, argument
// merge, substitution and InvalidSpec messages), judged by analysis.Evaluate.
func (s *session) runAnalysis(ctx context.Context, out, errOut io.Writer, run analysisRun, q analysis.Querier) error {
	templates := decide.Templates{}
	spec, err := s.template(ctx, run.ref)
	switch {
	case apierrors.IsNotFound(err): // AnalysisMetrics names it, as the operator does
	case err != nil:
		return err
	default:
		templates[run.ref] = spec
		warnUndeclared(errOut, run, spec)
	}
	step := &v1alpha1.RolloutAnalysis{Templates: []v1alpha1.AnalysisTemplateRef{run.ref}, Args: run.args}
	metrics, err := decide.AnalysisMetrics(0, step, s.namespace, templates, nil)
	if err != nil {
		return fmt.Errorf("%s: %w (kubectl dgd analysis run checks the template as spec.rollout.steps[0].analysis of a DGD in namespace %s, a step that references it alone: --arg sets its args)",
			v1alpha1.ReasonInvalidSpec, err, s.namespace)
	}
	values := run.values(s.namespace)
	fmt.Fprintf(out, "%s, measured once:\n", run.describe(s.namespace, metrics))
	var bad []string
	for _, m := range metrics {
		query, err := render(m, values)
		r := analysis.Result{Err: err}
		at := time.Now()
		if err == nil {
			r = q.Query(ctx, query, at)
		}
		meas := analysis.Evaluate(m, r, at)
		printMeasurement(out, m, query, meas)
		if meas.Phase != analysis.Successful {
			bad = append(bad, fmt.Sprintf("%s %s", m.Name, meas.Phase))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s %q did not pass: %s", run.ref.Kind(), run.ref.TemplateName, strings.Join(bad, ", "))
	}
	_, err = fmt.Fprintf(out, "%s %q passed: %d of %d metrics Successful\n", run.ref.Kind(), run.ref.TemplateName, len(metrics), len(metrics))
	return err
}

// template reads the spec of the template ref names (in the session's namespace unless
// it is a ClusterAnalysisTemplate), as the operator's observe does.
func (s *session) template(ctx context.Context, ref v1alpha1.AnalysisTemplateRef) (*v1alpha1.AnalysisTemplateSpec, error) {
	if ref.ClusterScope {
		t := &v1alpha1.ClusterAnalysisTemplate{}
		if err := s.client.Get(ctx, client.ObjectKey{Name: ref.TemplateName}, t); err != nil {
			return nil, err
		}
		return &t.Spec, nil
	}
	t := &v1alpha1.AnalysisTemplate{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: ref.TemplateName}, t); err != nil {
		return nil, err
	}
	return &t.Spec, nil
}

// warnUndeclared warns of each --arg the template does not declare: the operator
// ignores a step's argument no template declares (as Argo Rollouts does), so a typo
// would pass unseen.
func warnUndeclared(w io.Writer, run analysisRun, spec *v1alpha1.AnalysisTemplateSpec) {
	for _, a := range run.args {
		if !slices.ContainsFunc(spec.Args, func(d v1alpha1.AnalysisArgument) bool { return d.Name == a.Name }) {
			fmt.Fprintf(w, "Warning: %s %q declares no argument %q: --arg %s is ignored, as the operator ignores it in a step\n",
				run.ref.Kind(), run.ref.TemplateName, a.Name, a.Name)
		}
	}
}

// describe is the run's first line: the template, where, and its arguments' values.
func (run analysisRun) describe(namespace string, metrics []analysis.Metric) string {
	where := " in namespace " + namespace
	if run.ref.ClusterScope {
		where = ""
	}
	line := fmt.Sprintf("%s %q%s: %d metric(s)", run.ref.Kind(), run.ref.TemplateName, where, len(metrics))
	if len(metrics) > 0 && len(metrics[0].Args) > 0 { // a template's metrics share its arguments
		var args []string
		for k, v := range metrics[0].Args {
			args = append(args, fmt.Sprintf("%s=%q", k, v))
		}
		sort.Strings(args)
		line += ", args " + strings.Join(args, " ")
	}
	return line
}

// unfilled marks, in a rendered query, a placeholder this command has no value for:
// analysis.Expand substitutes the mark (so a query is checked and capped by the same
// code as the operator's), and render then names the placeholder.
const unfilled = "\x00"

// values are the placeholders of a query and what this command fills them with: those
// of analysis.Values (the operator's), the namespaces from the flags, every other one
// (the DGD's name, the revisions' hashes, numbers and workloads, a namespace whose flag
// is not set) marked unfilled.
func (run analysisRun) values(namespace string) map[string]string {
	filled := map[string]bool{".Namespace": true}
	for _, r := range []struct{ prefix, ns string }{{".Canary", run.canary}, {".Stable", run.stable}} {
		if r.ns != "" {
			filled[r.prefix+".Namespace"], filled[r.prefix+".MetricsNamespace"] = true, true
		}
	}
	out := analysis.Values(analysis.Vars{Namespace: namespace,
		Canary: analysis.NewRevision(0, "", run.canary, nil), Stable: analysis.NewRevision(0, "", run.stable, nil)})
	for tag := range out {
		if !filled[tag] {
			out[tag] = unfilled + tag + unfilled
		}
	}
	return out
}

// render is m's query with values and m's arguments, as analysis.Render expands it;
// a placeholder values marks unfilled is an error naming it and what would fill it.
func render(m analysis.Metric, values map[string]string) (string, error) {
	all := analysis.ArgValues(m.Args)
	for k, v := range values {
		all[k] = v
	}
	query, err := analysis.Expand(m.Query, all)
	if err != nil {
		return "", err
	}
	if _, rest, ok := strings.Cut(query, unfilled); ok {
		tag, _, _ := strings.Cut(rest, unfilled)
		return "", unfilledError(tag)
	}
	return query, nil
}

func unfilledError(tag string) error {
	for _, r := range []struct{ prefix, flag string }{{".Canary.", "--canary-namespace"}, {".Stable.", "--stable-namespace"}} {
		if tag == r.prefix+"Namespace" || tag == r.prefix+"MetricsNamespace" {
			return fmt.Errorf("the query uses {{%s}}: pass %s", tag, r.flag)
		}
	}
	return errors.New("the query uses {{" + tag + "}}, which only a DGD's rollout knows: kubectl dgd analysis run fills {{.Namespace}} (-n), " +
		"{{.Canary.Namespace}} and {{.Canary.MetricsNamespace}} (--canary-namespace), {{.Stable.Namespace}} and " +
		"{{.Stable.MetricsNamespace}} (--stable-namespace), and {{args.NAME}}")
}

// printMeasurement writes one metric's verdict, value, query and conditions.
func printMeasurement(w io.Writer, m analysis.Metric, query string, meas analysis.Measurement) {
	line := fmt.Sprintf("- %s: %s", m.Name, meas.Phase)
	if meas.Value != "" {
		line += ", value " + meas.Value
	}
	if meas.Message != "" {
		line += ": " + meas.Message
	}
	fmt.Fprintln(w, line)
	label := "query"
	if query == "" {
		label, query = "query (not rendered)", m.Query
	}
	fmt.Fprintf(w, "    %s: %s\n", label, strings.ReplaceAll(strings.TrimSpace(query), "\n", "\n"+strings.Repeat(" ", len(label)+6)))
	for _, c := range []struct{ name, expr string }{{"successCondition", m.SuccessCondition}, {"failureCondition", m.FailureCondition}} {
		if c.expr != "" {
			fmt.Fprintf(w, "    %s: %s\n", c.name, c.expr)
		}
	}
}
