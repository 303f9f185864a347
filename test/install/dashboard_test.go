package install

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/prom"
)

func dashboardPath() string { return filepath.Join(chartDir(), "dashboards", "dgd-rollout.json") }

// dashboardQueries returns every PromQL query of the dashboard by where it is: each
// panel target's expr, and each template variable's label_values(<selector>, label)
// selector.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(dashboardPath())
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string `json:"uid"`
		Panels     []dashPanel
		Templating struct {
			List []struct {
				Name  string
				Type  string
				Query any
			}
		}
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	out := map[string]string{}
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out["panel "+p.Title+" "+tg.RefID] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	labelValues := regexp.MustCompile(`^label_values\((.*),\s*[a-zA-Z_]+\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)["query"].(string)
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Fatalf("variable %s: %q is not label_values(<selector>, <label>)", v.Name, q)
		}
		out["variable "+v.Name] = m[1]
	}
	return out
}

type dashPanel struct {
	Title   string
	Type    string
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	}
	Panels []dashPanel
}

// grafanaVars replaces Grafana's variables by values PromQL parses: ranges by 5m, the
// dashboard's own (inside label matchers) by a regex.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "5m", "$__range", "1h",
	"$namespace", ".*", "$dgd", ".*", "$dynamo_namespace", ".*", "$engine_namespace", ".*")

// controllerRuntimeMetrics are the controller_runtime_* names in the source of the
// controller-runtime this module builds with (pkg/internal/controller/metrics, which
// the manager registers into controller-runtime's registry; internal, so not importable).
func controllerRuntimeMetrics(t *testing.T) map[string]bool {
	t.Helper()
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/controller-runtime").Output()
	if err != nil {
		t.Fatalf("go list controller-runtime: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "pkg", "internal", "controller", "metrics", "metrics.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`Name:\s+"(controller_runtime_[a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		out[m[1]] = true
	}
	if !out["controller_runtime_reconcile_time_seconds"] {
		t.Fatalf("no controller_runtime_reconcile_time_seconds in controller-runtime's source: %v", out)
	}
	return out
}

// dynamoMetrics are the metric families test/prom's exporter serves for a Ready worker
// pod whose requests partly fail (every family it has: Dynamo's runtime and engine metrics).
func dynamoMetrics(t *testing.T) map[string]bool {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "graphs", Name: "w", UID: "u1",
			Labels: map[string]string{v1alpha1.LabelWorkerHash: "0a1b2c3d", v1alpha1.LabelService: "VllmDecodeWorker"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "vllm-runtime:1-errors",
			Env: []corev1.EnvVar{{Name: v1alpha1.EnvDynNamespace, Value: "graphs-agg-0a1b2c3d"}}}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour))}}},
	}
	e, err := prom.StartExporter(fake.NewClientBuilder().WithScheme(scheme).WithObjects(pod).Build(), prom.Demo)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	text, err := e.Render(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) `).FindAllStringSubmatch(text, -1) {
		out[m[1]] = true
	}
	return out
}

// TestChartDashboard: the Grafana dashboard is JSON, every query runs on a real
// Prometheus (2.42, so on every later one too), and every metric a query reads is one the operator
// registers (its collectors' descriptors), one of controller-runtime's, or one of
// Dynamo's as test/prom's exporter serves them. It shows what issue 27 asks for, and
// the chart ships it as a sidecar ConfigMap only when asked.
func TestChartDashboard(t *testing.T) {
	known := metricNames()
	for n := range controllerRuntimeMetrics(t) {
		known[n] = true
	}
	for n := range dynamoMetrics(t) {
		known[n] = true
	}
	// A histogram's series are <name>_bucket, _sum and _count.
	defined := func(name string) bool {
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && known[base] {
				return true
			}
		}
		return false
	}
	// A real Prometheus (test/prom: Debian's 2.42 on PATH) runs every query: it parses
	// and type-checks it, as a stock Prometheus of 2.42 or later does.
	srv, err := prom.Start(context.Background(), prom.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close() }()
	used := map[string]bool{}
	queries := dashboardQueries(t)
	for where, q := range queries {
		if err := srv.Check(context.Background(), grafanaVars.Replace(q)); err != nil {
			t.Errorf("%s: %q does not run: %v", where, q, err)
			continue
		}
		for _, name := range prom.SelectorNames(grafanaVars.Replace(q)) {
			if !defined(name) {
				t.Errorf("%s reads %s, which neither the operator, controller-runtime nor Dynamo's workers export", where, name)
			}
			used[strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count")] = true
		}
	}
	for _, want := range []string{"dgd_rollout_phase", "dgd_rollout_steps_total", "dgd_analysis_measurements_total",
		"dgd_reconcile_errors_total", "controller_runtime_reconcile_time_seconds", "dynamo_component_requests_total",
		"dynamo_component_errors_total", "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds"} {
		if !used[want] {
			t.Errorf("no panel reads %s", want)
		}
	}
	// A worker has no error series until its first error (test/prom's exporter, as
	// Dynamo): every error-rate query must make that 0, not no data.
	for where, q := range queries {
		if strings.Contains(q, "dynamo_component_errors_total") && !strings.Contains(q, " or ") {
			t.Errorf("%s: %q reads the error counter without an 'or' fallback", where, q)
		}
	}
	if !strings.Contains(queries["panel Error rate B"], "or vector(0)") {
		t.Errorf("the total error rate has no 'or vector(0)': %q", queries["panel Error rate B"])
	}

	raw, err := os.ReadFile(dashboardPath())
	if err != nil {
		t.Fatal(err)
	}
	if cms := ofKind(render(t, "r", "monitoring", nil), "ConfigMap"); len(cms) != 0 {
		t.Errorf("the dashboard ConfigMap renders by default: %v", cms[0].GetName())
	}
	objs := render(t, "r", "monitoring", values(t, `metrics: {grafanaDashboard: {enabled: true, annotations: {grafana_folder: Dynamo}}}`))
	cm := into[corev1.ConfigMap](t, find(objs, "ConfigMap", "monitoring", "r-dgd-rollout-dashboard"))
	if cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "Dynamo" {
		t.Errorf("the dashboard ConfigMap is labelled %v, annotated %v", cm.Labels, cm.Annotations)
	}
	if got := cm.Data["dgd-rollout.json"]; strings.TrimSpace(got) != strings.TrimSpace(string(raw)) {
		t.Errorf("the ConfigMap's dashboard differs from dashboards/dgd-rollout.json (%d bytes, want %d)", len(got), len(raw))
	}
	objs = render(t, "r", "monitoring", values(t, `metrics: {grafanaDashboard: {enabled: true, namespace: grafana}}`))
	if find(objs, "ConfigMap", "grafana", "r-dgd-rollout-dashboard") == nil {
		t.Error("metrics.grafanaDashboard.namespace does not place the ConfigMap")
	}
}
