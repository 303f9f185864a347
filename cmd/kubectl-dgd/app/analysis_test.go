package app

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/test/prom"
)

// errorRate is config/samples/analysis/error-rate.yaml's template (an argument with a
// default, one without) with a second metric that compares the canary with the stable.
func errorRate() v1alpha1.AnalysisTemplateSpec {
	return v1alpha1.AnalysisTemplateSpec{
		Args: []v1alpha1.AnalysisArgument{{Name: "endpoint", Value: ptr.To("generate")}, {Name: "max-error-rate"}},
		Metrics: []v1alpha1.AnalysisMetric{{
			Name: "error-rate",
			Query: `(sum(rate(dynamo_component_errors_total{dynamo_namespace="{{.Canary.MetricsNamespace}}",dynamo_endpoint="{{args.endpoint}}"}[30s])) or vector(0))
/ sum(rate(dynamo_component_requests_total{dynamo_namespace="{{.Canary.MetricsNamespace}}",dynamo_endpoint="{{args.endpoint}}"}[30s]))
`,
			SuccessCondition: "result < {{args.max-error-rate}}",
		}, {
			Name:             "ttft-vs-stable",
			Query:            `max(vllm:ttft{dynamo_namespace="{{ .Canary.Namespace }}"}) / max(vllm:ttft{dynamo_namespace="{{.Stable.Namespace}}"})`,
			SuccessCondition: "result <= 1.2",
			FailureCondition: "result > 1.5",
		}},
	}
}

const (
	canaryNS = "team-a-vllm-ab12cd34"
	stableNS = "team-a-vllm-77aa88bb"
)

// analysisWorld is a fake API server holding the namespaced AnalysisTemplate
// "error-rate" of team-a and a ClusterAnalysisTemplate of the same name (a threshold
// argument only), and a fake Prometheus whose answers a test sets per metric name.
type analysisWorld struct {
	s       *session
	prom    *prom.Fake
	answers map[string]prom.Answer // by a fragment of the query
}

func newAnalysisWorld(t *testing.T) *analysisWorld {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cluster := &v1alpha1.ClusterAnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Name: "error-rate"}, Spec: v1alpha1.AnalysisTemplateSpec{
		Args: []v1alpha1.AnalysisArgument{{Name: "limit", Value: ptr.To("0.01")}},
		Metrics: []v1alpha1.AnalysisMetric{{Name: "cluster-errors",
			Query: `sum(rate(dynamo_component_errors_total{dynamo_namespace="{{.Canary.MetricsNamespace}}"}[1m]))`, SuccessCondition: "result < {{args.limit}}"}},
	}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&v1alpha1.AnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "error-rate"}, Spec: errorRate()},
		cluster).Build()
	w := &analysisWorld{s: &session{client: c, namespace: "team-a", scheme: scheme}, answers: map[string]prom.Answer{}}
	w.prom = prom.StartFake(func(q string) prom.Answer {
		for frag, a := range w.answers {
			if strings.Contains(q, frag) {
				return a
			}
		}
		return prom.Answer{Error: "no answer set for " + q}
	})
	t.Cleanup(w.prom.Close)
	return w
}

// run runs the verb through the session and the operator's Prometheus client, and
// returns what it printed (an error as kubectl dgd prints it) and its error.
func (w *analysisWorld) run(t *testing.T, run analysisRun) (string, error) {
	t.Helper()
	q, err := analysis.NewPrometheus(w.prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = w.s.runAnalysis(context.Background(), &out, &out, run, q)
	if err != nil {
		PrintError(&out, err)
	}
	return out.String(), err
}

func args(kv ...string) []v1alpha1.AnalysisArgument {
	out, err := parseArgs(kv)
	if err != nil {
		panic(err)
	}
	return out
}

var errorRateRef = v1alpha1.AnalysisTemplateRef{TemplateName: "error-rate"}

// TestAnalysisRun: each metric of the template is rendered with the flags' namespaces
// and the arguments (the --arg over the template's default), sent once to Prometheus
// as rendered, and judged by its conditions; the command fails unless every metric is
// Successful. The transcript of every case is a golden file.
func TestAnalysisRun(t *testing.T) {
	var transcript strings.Builder
	record := func(title, out string) { fmt.Fprintf(&transcript, "## %s\n%s\n", title, out) }
	full := analysisRun{ref: errorRateRef, canary: canaryNS, stable: stableNS, args: args("max-error-rate=0.05")}

	t.Run("every metric passes", func(t *testing.T) {
		w := newAnalysisWorld(t)
		w.answers["errors_total"] = prom.Answer{Values: []float64{0.012}}
		w.answers["vllm:ttft"] = prom.Answer{Values: []float64{1.1}}
		out, err := w.run(t, full)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		want := []string{
			`(sum(rate(dynamo_component_errors_total{dynamo_namespace="team_a_vllm_ab12cd34",dynamo_endpoint="generate"}[30s])) or vector(0))
/ sum(rate(dynamo_component_requests_total{dynamo_namespace="team_a_vllm_ab12cd34",dynamo_endpoint="generate"}[30s]))
`,
			`max(vllm:ttft{dynamo_namespace="team-a-vllm-ab12cd34"}) / max(vllm:ttft{dynamo_namespace="team-a-vllm-77aa88bb"})`,
		}
		if diff := cmp.Diff(want, w.prom.Queries()); diff != "" {
			t.Errorf("queries Prometheus was sent, once each (-want +got):\n%s", diff)
		}
		if !strings.Contains(out, "successCondition: result < 0.05") {
			t.Errorf("the condition is shown with the argument's value:\n%s", out)
		}
		record("every metric passes", out)
	})

	t.Run("a failed metric fails the command", func(t *testing.T) {
		w := newAnalysisWorld(t)
		w.answers["errors_total"] = prom.Answer{Values: []float64{0.2}}
		w.answers["vllm:ttft"] = prom.Answer{Values: []float64{1.6}}
		out, err := w.run(t, full)
		if err == nil || err.Error() != `AnalysisTemplate "error-rate" did not pass: error-rate Failed, ttft-vs-stable Failed` {
			t.Fatalf("error = %v\n%s", err, out)
		}
		record("a failed metric fails the command", out)
	})

	t.Run("inconclusive, no data, a Prometheus error: not passed either", func(t *testing.T) {
		w := newAnalysisWorld(t)
		w.answers["errors_total"] = prom.Answer{} // no series
		w.answers["vllm:ttft"] = prom.Answer{Values: []float64{1.3}}
		out, err := w.run(t, full)
		if err == nil || err.Error() != `AnalysisTemplate "error-rate" did not pass: error-rate Error, ttft-vs-stable Inconclusive` {
			t.Fatalf("error = %v\n%s", err, out)
		}
		record("inconclusive and no data", out)

		w.answers = map[string]prom.Answer{"errors_total": {Values: []float64{0.01, 0.02}}, "vllm:ttft": {Error: `invalid parameter "query": 1:5: parse error: unexpected character`}}
		out, err = w.run(t, full)
		if err == nil || !strings.Contains(out, "Error: querying Prometheus: bad_data: invalid parameter") || !strings.Contains(out, "returned 2 series") {
			t.Fatalf("error = %v\n%s", err, out)
		}
		record("two series, a query Prometheus refuses", out)
	})

	t.Run("a placeholder without its flag is an Error naming the flag, and is not sent", func(t *testing.T) {
		w := newAnalysisWorld(t)
		w.answers["errors_total"] = prom.Answer{Values: []float64{0.01}}
		run := full
		run.stable = ""
		out, err := w.run(t, run)
		if err == nil || !strings.Contains(out, "- ttft-vs-stable: Error: the query uses {{.Stable.Namespace}}: pass --stable-namespace") {
			t.Fatalf("error = %v\n%s", err, out)
		}
		if n := len(w.prom.Queries()); n != 1 {
			t.Errorf("%d queries sent, want 1 (the rendered one only)", n)
		}
		record("no --stable-namespace", out)
	})

	t.Run("an argument the template does not declare is ignored, with a warning", func(t *testing.T) {
		w := newAnalysisWorld(t)
		w.answers["errors_total"] = prom.Answer{Values: []float64{0.01}}
		w.answers["vllm:ttft"] = prom.Answer{Values: []float64{1}}
		run := full
		run.args = args("max-error-rate=0.02", "endpoint=chat", "max-eror-rate=0.5")
		out, err := w.run(t, run)
		if err != nil || !strings.Contains(out, `Warning: AnalysisTemplate "error-rate" declares no argument "max-eror-rate"`) ||
			!strings.Contains(w.prom.Queries()[0], `dynamo_endpoint="chat"`) {
			t.Fatalf("error = %v\n%s", err, out)
		}
		record("an undeclared argument; the step's value over a default", out)
	})

	t.Run("cluster scope reads the ClusterAnalysisTemplate", func(t *testing.T) {
		w := newAnalysisWorld(t)
		w.answers["errors_total"] = prom.Answer{Values: []float64{0.001}}
		out, err := w.run(t, analysisRun{ref: v1alpha1.AnalysisTemplateRef{TemplateName: "error-rate", ClusterScope: true}, canary: canaryNS})
		if err != nil || !strings.Contains(out, "- cluster-errors: Successful, value 0.001") {
			t.Fatalf("error = %v\n%s", err, out)
		}
		if want := `sum(rate(dynamo_component_errors_total{dynamo_namespace="team_a_vllm_ab12cd34"}[1m]))`; cmp.Diff([]string{want}, w.prom.Queries()) != "" {
			t.Errorf("queries %q, want %q", w.prom.Queries(), want)
		}
		record("--cluster-scope", out)
	})

	expectGolden(t, "analysis-run", transcript.String())
}

// TestAnalysisRunInvalidSpec: a template that does not exist, or an argument with no
// value, is the operator's InvalidSpec message for a step that references the template
// (decide.AnalysisMetrics, compared with it here), and nothing is queried.
func TestAnalysisRunInvalidSpec(t *testing.T) {
	for name, tc := range map[string]struct {
		run  analysisRun
		want string
	}{
		"missing template": {
			run:  analysisRun{ref: v1alpha1.AnalysisTemplateRef{TemplateName: "nope"}, canary: canaryNS},
			want: `spec.rollout.steps[0].analysis.templates[0]: AnalysisTemplate "nope" not found in namespace team-a: create it, or fix templateName (clusterScope: false)`,
		},
		"missing cluster template": {
			run:  analysisRun{ref: v1alpha1.AnalysisTemplateRef{TemplateName: "nope", ClusterScope: true}, canary: canaryNS},
			want: `spec.rollout.steps[0].analysis.templates[0]: ClusterAnalysisTemplate "nope" not found in the cluster: create it, or fix templateName (clusterScope: true)`,
		},
		"missing argument": {
			run: analysisRun{ref: errorRateRef, canary: canaryNS, stable: stableNS, args: args("endpoint=chat")},
			want: `spec.rollout.steps[0].analysis.args: AnalysisTemplate "error-rate" needs a value for argument "max-error-rate" (it has no default): ` +
				`pass it in spec.rollout.steps[0].analysis.args`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := newAnalysisWorld(t)
			out, err := w.run(t, tc.run)
			if err == nil {
				t.Fatalf("no error:\n%s", out)
			}
			// The operator's message for the same step, as its pass reports it.
			templates := decide.Templates{errorRateRef: ptr.To(errorRate())}
			_, opErr := decide.AnalysisMetrics(0, &v1alpha1.RolloutAnalysis{Templates: []v1alpha1.AnalysisTemplateRef{tc.run.ref}, Args: tc.run.args}, "team-a", templates, nil)
			if opErr == nil || opErr.Error() != tc.want {
				t.Fatalf("the operator says %v, want %q", opErr, tc.want)
			}
			if !strings.HasPrefix(out, "error: InvalidSpec: "+tc.want+" (kubectl dgd analysis run checks the template as spec.rollout.steps[0].analysis") {
				t.Errorf("printed:\n%s\nwant the operator's message %q", out, tc.want)
			}
			if q := w.prom.Queries(); len(q) != 0 {
				t.Errorf("queried %q", q)
			}
		})
	}
}

// TestAnalysisRunFlags: the flags are checked before the cluster is reached: a
// malformed or repeated --arg, no Prometheus URL (flag or environment variable), the
// template name.
func TestAnalysisRunFlags(t *testing.T) {
	t.Setenv(PrometheusURLEnv, "")
	os.Unsetenv(PrometheusURLEnv)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"analysis", "run", "t", "--prometheus-url=http://p", "--arg", "x"}, `--arg "x": want NAME=VALUE`},
		{[]string{"analysis", "run", "t", "--prometheus-url=http://p", "--arg", "=1"}, `--arg "=1": want NAME=VALUE`},
		{[]string{"analysis", "run", "t", "--prometheus-url=http://p", "--arg", "x=1", "--arg", "x=2"}, `--arg x is given twice`},
		{[]string{"analysis", "run", "t"}, "no Prometheus to query: pass --prometheus-url or set DGD_PROMETHEUS_URL"},
		{[]string{"analysis", "run"}, "kubectl dgd analysis run needs exactly one analysis template name, got 0 arguments (see --help)"},
	} {
		var out bytes.Buffer
		flags := genericclioptions.NewConfigFlags(false)
		flags.KubeConfig = ptr.To("/nonexistent/kubeconfig")
		cmd := NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out}, flags)
		cmd.SetArgs(tc.args)
		if err := cmd.Execute(); err == nil || err.Error() != tc.want {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.want)
		}
	}

	got, err := parseArgs([]string{"empty=", "regex=a|b,c", "eq=x=y"})
	if err != nil {
		t.Fatal(err)
	}
	want := []v1alpha1.AnalysisArgument{{Name: "empty", Value: ptr.To("")}, {Name: "regex", Value: ptr.To("a|b,c")}, {Name: "eq", Value: ptr.To("x=y")}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseArgs (-want +got):\n%s", diff)
	}
}

// TestAnalysisRunPlaceholdersOfARollout: what only a DGD's rollout knows cannot be
// tried: the DGD's name, a hash or a revision number is an Error naming it (nothing
// is queried), a workload is the operator's InvalidSpec for a DGD without that worker
// service; {{.Namespace}} is -n's.
func TestAnalysisRunPlaceholdersOfARollout(t *testing.T) {
	w := newAnalysisWorld(t)
	ctx := context.Background()
	rollout := &v1alpha1.AnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "rollout"}, Spec: v1alpha1.AnalysisTemplateSpec{
		Metrics: []v1alpha1.AnalysisMetric{
			{Name: "name", Query: `up{dgd="{{.Name}}"}`, SuccessCondition: "result >= 1"},
			{Name: "hash", Query: `up{hash="{{.Canary.Hash}}"}`, SuccessCondition: "result >= 1"},
			{Name: "revision", Query: `up{revision="{{.Stable.Revision}}"}`, SuccessCondition: "result >= 1"},
			{Name: "namespace", Query: `up{namespace="{{.Namespace}}"}`, SuccessCondition: "result >= 1"},
		}}}
	workload := &v1alpha1.AnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "workload"}, Spec: v1alpha1.AnalysisTemplateSpec{
		Metrics: []v1alpha1.AnalysisMetric{{Name: "w", Query: `up{deployment="{{.Canary.Workloads.decode}}"}`, SuccessCondition: "result >= 1"}}}}
	must(t, w.s.client.Create(ctx, rollout))
	must(t, w.s.client.Create(ctx, workload))
	w.answers[`namespace="team-a"`] = prom.Answer{Values: []float64{1}}

	out, err := w.run(t, analysisRun{ref: v1alpha1.AnalysisTemplateRef{TemplateName: "rollout"}, canary: canaryNS, stable: stableNS})
	if err == nil || err.Error() != `AnalysisTemplate "rollout" did not pass: name Error, hash Error, revision Error` {
		t.Fatalf("error = %v\n%s", err, out)
	}
	for _, tag := range []string{"{{.Name}}", "{{.Canary.Hash}}", "{{.Stable.Revision}}"} {
		if !strings.Contains(out, "Error: the query uses "+tag+", which only a DGD's rollout knows") {
			t.Errorf("%s is not named:\n%s", tag, out)
		}
	}
	if diff := cmp.Diff([]string{`up{namespace="team-a"}`}, w.prom.Queries()); diff != "" {
		t.Errorf("queries (-want +got):\n%s", diff)
	}

	out, err = w.run(t, analysisRun{ref: v1alpha1.AnalysisTemplateRef{TemplateName: "workload"}, canary: canaryNS})
	if err == nil || !strings.Contains(out, `error: InvalidSpec: spec.rollout.steps[0].analysis.templates[0] (AnalysisTemplate "workload") metrics[0].query: not a valid query template: unknown placeholder {{.Canary.Workloads.decode}}`) {
		t.Fatalf("error = %v\n%s", err, out)
	}
}
