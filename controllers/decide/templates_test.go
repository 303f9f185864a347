package decide

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/analysis"
)

// TestAnalysisMetrics: a step's metrics are its inline ones and its templates', with
// {{args.x}} from the step over the template's defaults; what cannot run is InvalidSpec
// naming the field and the template.
func TestAnalysisMetrics(t *testing.T) {
	errorRate := v1alpha1.AnalysisMetric{Name: "error-rate", SuccessCondition: "result < {{args.max}}",
		Query: `sum(rate(errors{dynamo_namespace="{{.Canary.MetricsNamespace}}",endpoint="{{ args.endpoint }}"}[30s]))`}
	spec := &v1alpha1.AnalysisTemplateSpec{
		Args:    []v1alpha1.AnalysisArgument{{Name: "endpoint"}, {Name: "max", Value: ptr.To("0.05")}},
		Metrics: []v1alpha1.AnalysisMetric{errorRate},
	}
	ns := v1alpha1.AnalysisTemplateRef{TemplateName: "rate"}
	cl := v1alpha1.AnalysisTemplateRef{TemplateName: "rate", ClusterScope: true}
	inline := v1alpha1.AnalysisMetric{Name: "up", Query: `up{x="{{args.endpoint}}"}`, SuccessCondition: "result == 1.0"}
	args := func(kv ...string) []v1alpha1.AnalysisArgument {
		var out []v1alpha1.AnalysisArgument
		for i := 0; i < len(kv); i += 2 {
			out = append(out, v1alpha1.AnalysisArgument{Name: kv[i], Value: ptr.To(kv[i+1])})
		}
		return out
	}
	vars := analysis.Vars{Canary: analysis.NewRevision(2, "abc", "ns-g-abc", nil)}

	t.Run("namespaced, with an arg and a default", func(t *testing.T) {
		got, err := AnalysisMetrics(1, &v1alpha1.RolloutAnalysis{Templates: []v1alpha1.AnalysisTemplateRef{ns}, Metrics: []v1alpha1.AnalysisMetric{inline},
			Args: args("endpoint", "generate", "unused", "x")}, "ns", Templates{ns: spec}, []string{"decode"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Name != "up" || got[1].Name != "error-rate" || got[1].SuccessCondition != "result < 0.05" {
			t.Fatalf("metrics %+v", got)
		}
		q, err := analysis.Render(got[1].Query, vars, got[1].Args)
		if want := `sum(rate(errors{dynamo_namespace="ns_g_abc",endpoint="generate"}[30s]))`; err != nil || q != want {
			t.Errorf("query %q, %v; want %q", q, err, want)
		}
		if q, err := analysis.Render(got[0].Query, vars, got[0].Args); err != nil || q != `up{x="generate"}` {
			t.Errorf("inline query %q, %v", q, err)
		}
	})
	t.Run("the step's value over the default; cluster scope is another template", func(t *testing.T) {
		got, err := AnalysisMetrics(0, &v1alpha1.RolloutAnalysis{Templates: []v1alpha1.AnalysisTemplateRef{cl}, Args: args("endpoint", "e", "max", "0.1")},
			"ns", Templates{cl: spec}, nil)
		if err != nil || got[0].SuccessCondition != "result < 0.1" {
			t.Fatalf("%+v, %v", got, err)
		}
		_, err = AnalysisMetrics(0, &v1alpha1.RolloutAnalysis{Templates: []v1alpha1.AnalysisTemplateRef{cl}, Args: args("endpoint", "e")}, "ns", Templates{ns: spec}, nil)
		wantInvalid(t, err, `spec.rollout.steps[0].analysis.templates[0]: ClusterAnalysisTemplate "rate" not found in the cluster`)
	})
	t.Run("missing template", func(t *testing.T) {
		_, err := AnalysisMetrics(3, &v1alpha1.RolloutAnalysis{Templates: []v1alpha1.AnalysisTemplateRef{ns}}, "team-a", Templates{}, nil)
		wantInvalid(t, err, `spec.rollout.steps[3].analysis.templates[0]: AnalysisTemplate "rate" not found in namespace team-a`)
	})
	t.Run("missing arg", func(t *testing.T) {
		_, err := AnalysisMetrics(1, &v1alpha1.RolloutAnalysis{Templates: []v1alpha1.AnalysisTemplateRef{ns}}, "ns", Templates{ns: spec}, nil)
		wantInvalid(t, err, `spec.rollout.steps[1].analysis.args: AnalysisTemplate "rate" needs a value for argument "endpoint"`)
	})
	t.Run("an arg the template does not declare", func(t *testing.T) {
		undeclared := &v1alpha1.AnalysisTemplateSpec{Metrics: []v1alpha1.AnalysisMetric{errorRate}}
		_, err := AnalysisMetrics(1, &v1alpha1.RolloutAnalysis{Templates: []v1alpha1.AnalysisTemplateRef{ns}, Args: args("endpoint", "e")}, "ns", Templates{ns: undeclared}, nil)
		wantInvalid(t, err, `templates[0] (AnalysisTemplate "rate") metrics[0].successCondition: unknown placeholder {{args.max}}`)
	})
	t.Run("a metric twice", func(t *testing.T) {
		_, err := AnalysisMetrics(1, &v1alpha1.RolloutAnalysis{Templates: []v1alpha1.AnalysisTemplateRef{ns, cl}, Args: args("endpoint", "e")}, "ns", Templates{ns: spec, cl: spec}, nil)
		wantInvalid(t, err, `metric "error-rate" is defined twice`)
	})
	t.Run("the cap on a query applies after substitution", func(t *testing.T) {
		_, err := AnalysisMetrics(1, &v1alpha1.RolloutAnalysis{Templates: []v1alpha1.AnalysisTemplateRef{ns}, Args: args("endpoint", strings.Repeat("x", analysis.MaxExpandedQuery))}, "ns", Templates{ns: spec}, nil)
		wantInvalid(t, err, "metrics[0].query: not a valid query template: the query is over 16384 bytes")
	})
	t.Run("at most MaxStepMetrics", func(t *testing.T) {
		many := &v1alpha1.AnalysisTemplateSpec{}
		for _, n := range []string{"a", "b", "c", "d", "e"} {
			many.Metrics = append(many.Metrics, v1alpha1.AnalysisMetric{Name: n, Query: "up", SuccessCondition: "result == 1.0"})
		}
		var inl []v1alpha1.AnalysisMetric
		for _, n := range []string{"f", "g", "h", "i"} {
			inl = append(inl, v1alpha1.AnalysisMetric{Name: n, Query: "up", SuccessCondition: "result == 1.0"})
		}
		_, err := AnalysisMetrics(1, &v1alpha1.RolloutAnalysis{Templates: []v1alpha1.AnalysisTemplateRef{ns}, Metrics: inl}, "ns", Templates{ns: many}, nil)
		wantInvalid(t, err, "9 metrics with those of its templates, at most 8")
	})
}

func wantInvalid(t *testing.T, err error, want string) {
	t.Helper()
	var bad *invalidSpec
	if !errors.As(err, &bad) || !strings.Contains(bad.msg, want) {
		t.Errorf("error %v, want InvalidSpec containing %q", err, want)
	}
}
