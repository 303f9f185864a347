package decide

import (
	"fmt"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/analysis"
)

// Templates are the analysis templates a DGD's steps reference, as observe read them
// (Snapshot.AnalysisTemplates): an AnalysisTemplate of the DGD's namespace, or a
// ClusterAnalysisTemplate, by reference. A reference missing from the map names a
// template that does not exist.
type Templates map[v1alpha1.AnalysisTemplateRef]*v1alpha1.AnalysisTemplateSpec

// TemplateRefs are the templates the steps of dgd reference, each once, in the order
// the steps name them.
func TemplateRefs(dgd *v1alpha1.DynamoGraphDeployment) []v1alpha1.AnalysisTemplateRef {
	var out []v1alpha1.AnalysisTemplateRef
	seen := map[v1alpha1.AnalysisTemplateRef]bool{}
	if dgd.Spec.Rollout == nil {
		return nil
	}
	for _, s := range dgd.Spec.Rollout.Steps {
		if s.Analysis == nil {
			continue
		}
		for _, r := range s.Analysis.Templates {
			if !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
		}
	}
	return out
}

// AnalysisMetrics are the metrics analysis step i measures, defaults applied: its inline
// metrics with the step's args, then each referenced template's with its args (the
// step's over the template's defaults), as Argo Rollouts merges them
// (argoproj/argo-rollouts utils/analysis/helpers.go, MergeArgs: a template argument
// with no value after the merge is an error; an argument the step passes that no
// template declares is ignored). Every {{args.<name>}} is substituted by the same
// placeholder machinery as the rest of a query (analysis.Expand: one pass, no loops, the
// 16 KiB cap after substitution), and in the conditions. What cannot run is InvalidSpec
// naming the field and the template: a template that does not exist, an argument
// without a value, a metric name measured twice, more than MaxStepMetrics metrics.
func AnalysisMetrics(i int, a *v1alpha1.RolloutAnalysis, namespace string, templates Templates, workers []string) ([]analysis.Metric, error) {
	field := fmt.Sprintf("spec.rollout.steps[%d].analysis", i)
	stepArgs := map[string]string{}
	for _, arg := range a.Args {
		if arg.Value != nil {
			stepArgs[arg.Name] = *arg.Value
		}
	}
	var out []analysis.Metric
	from := map[string]string{} // metric name -> where it was defined
	add := func(where string, m v1alpha1.AnalysisMetric, args map[string]string) error {
		if prev, ok := from[m.Name]; ok {
			return &invalidSpec{msg: fmt.Sprintf("%s: metric %q is defined twice (%s and %s): a step measures each metric name once", field, m.Name, prev, where)}
		}
		from[m.Name] = where
		metric, err := resolveMetric(where, m, args, workers)
		if err != nil {
			return err
		}
		out = append(out, metric)
		return nil
	}
	for j, m := range a.Metrics {
		if err := add(fmt.Sprintf("%s.metrics[%d]", field, j), m, stepArgs); err != nil {
			return nil, err
		}
	}
	for k, ref := range a.Templates {
		at := fmt.Sprintf("%s.templates[%d]", field, k)
		t, ok := templates[ref]
		if !ok {
			return nil, templateNotFound(at, ref, namespace)
		}
		args, err := templateArgs(field, ref, t, stepArgs)
		if err != nil {
			return nil, err
		}
		for j, m := range t.Metrics {
			if err := add(fmt.Sprintf("%s (%s %q) metrics[%d]", at, ref.Kind(), ref.TemplateName, j), m, args); err != nil {
				return nil, err
			}
		}
	}
	if len(out) > v1alpha1.MaxStepMetrics {
		return nil, &invalidSpec{msg: fmt.Sprintf("%s: %d metrics with those of its templates, at most %d (status records one entry per metric)", field, len(out), v1alpha1.MaxStepMetrics)}
	}
	return out, nil
}

// templateNotFound is the InvalidSpec of a step's reference (field at) to a template
// that does not exist.
func templateNotFound(at string, ref v1alpha1.AnalysisTemplateRef, namespace string) error {
	where := "in namespace " + namespace
	if ref.ClusterScope {
		where = "in the cluster"
	}
	return &invalidSpec{msg: fmt.Sprintf("%s: %s %q not found %s: create it, or fix templateName (clusterScope: %t)", at, ref.Kind(), ref.TemplateName, where, ref.ClusterScope)}
}

// templateArgs are the argument values a template's metrics read: the step's over the
// template's defaults; an argument with neither is InvalidSpec naming it.
func templateArgs(field string, ref v1alpha1.AnalysisTemplateRef, t *v1alpha1.AnalysisTemplateSpec, stepArgs map[string]string) (map[string]string, error) {
	args := map[string]string{}
	for _, arg := range t.Args {
		v, ok := stepArgs[arg.Name]
		switch {
		case ok:
			args[arg.Name] = v
		case arg.Value != nil:
			args[arg.Name] = *arg.Value
		default:
			return nil, &invalidSpec{msg: fmt.Sprintf("%s.args: %s %q needs a value for argument %q (it has no default): pass it in %s.args",
				field, ref.Kind(), ref.TemplateName, arg.Name, field)}
		}
	}
	return args, nil
}

// resolveMetric is a metric with its arguments: its conditions substituted, checked as
// CEL over result, and its query checked as a template over the analysis variables and
// the arguments (substituted at each measurement, with the revisions').
func resolveMetric(where string, m v1alpha1.AnalysisMetric, args map[string]string, workers []string) (analysis.Metric, error) {
	values := analysis.ArgValues(args)
	for _, c := range []struct {
		name string
		expr *string
	}{{"successCondition", &m.SuccessCondition}, {"failureCondition", &m.FailureCondition}} {
		if *c.expr == "" {
			continue
		}
		expanded, err := analysis.Expand(*c.expr, values)
		if err != nil {
			return analysis.Metric{}, &invalidSpec{msg: fmt.Sprintf("%s.%s: %v", where, c.name, err)}
		}
		*c.expr = expanded
	}
	if err := checkMetric(where, m, workers, args); err != nil {
		return analysis.Metric{}, err
	}
	metric := metricOf(m)
	if len(args) > 0 {
		metric.Args = args
	}
	return metric, nil
}
