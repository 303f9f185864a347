package install

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v3/pkg/action"

	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/controllers"
	"github.com/dgd-rollout/operator/test/e2e"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/test/prom"
)

const (
	release   = "dgd-rollout"
	releaseNS = "dgd-rollout-system"
	graphNS   = "graphs"
)

func helmConfig(t *testing.T, e *env) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	kc, ns := e.cl.Kubeconfig, releaseNS
	flags.KubeConfig, flags.Namespace = &kc, &ns
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, releaseNS, "secret", func(format string, v ...any) { t.Logf("helm: "+format, v...) }); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// podOf returns the release's manager Deployment's pod template from its manifest.
func podOf(t *testing.T, manifest string) corev1.PodSpec {
	t.Helper()
	objs, err := decode([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	return into[appsv1.Deployment](t, find(objs, "Deployment", releaseNS, release)).Spec.Template.Spec
}

// startPod runs the pod's init containers to completion, then its manager, under the
// pod's ServiceAccount, and waits until the manager is ready.
func (e *env) startPod(t *testing.T, pod corev1.PodSpec, ns string, extra ...string) *container {
	t.Helper()
	kc := e.saKubeconfig(t, ns, pod.ServiceAccountName)
	for _, ic := range pod.InitContainers {
		e.run(t, prepare(t, ic, ns, kc))
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want the manager", len(pod.Containers))
	}
	// The Pod object a kubelet would run (never scheduled here): what the operator
	// reads of itself, by the downward API's POD_NAME.
	obj := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podName}, Spec: *pod.DeepCopy()}
	if err := e.k8s.Create(context.Background(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("the manager's Pod object: %v", err)
	}
	t.Cleanup(func() { _ = e.k8s.Delete(context.Background(), obj) })
	m := prepare(t, pod.Containers[0], ns, kc, extra...)
	e.start(t, m)
	m.waitReady(t)
	return m
}

// embeddedCRDs are the CRDs the binary embeds (app.EmbeddedCRDs).
func embeddedCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds, err := app.EmbeddedCRDs()
	if err != nil {
		t.Fatal(err)
	}
	return crds
}

// embeddedDGDCRD is the DGD's CRD among those the binary embeds (the analysis
// templates' are the others).
func embeddedDGDCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds := embeddedCRDs(t)
	for _, c := range crds {
		if c.Name == "dynamographdeployments.nvidia.com" {
			return c
		}
	}
	t.Fatal("no DGD CRD embedded")
	return nil
}

// olderCRD is our CRD as an older release of the chart left it: created by Helm's crds/
// (a plain create), without the v1beta1 printer columns.
func olderCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	old := embeddedDGDCRD(t).DeepCopy()
	for i := range old.Spec.Versions {
		if old.Spec.Versions[i].Name == "v1beta1" {
			old.Spec.Versions[i].AdditionalPrinterColumns = nil
		}
	}
	return old
}

// olderTemplateCRDs are the AnalysisTemplate CRDs as the release before 7113d0f left
// them: with the category "dgd", which kubectl expands before the DGD's short name.
func olderTemplateCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds := embeddedCRDs(t)
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, c := range crds {
		if c.Name != app.CRDName {
			old := c.DeepCopy()
			old.Spec.Names.Categories = []string{"dgd"}
			out = append(out, old)
		}
	}
	if len(out) != 2 {
		t.Fatalf("%d AnalysisTemplate CRDs embedded, want 2", len(out))
	}
	return out
}

// checkNames checks that every embedded CRD's names are the live ones: server-side apply
// alone would keep a category that Helm's create owns too (app.setNames).
func (e *env) checkNames(t *testing.T) {
	t.Helper()
	crds := embeddedCRDs(t)
	for _, want := range crds {
		var live apiextensionsv1.CustomResourceDefinition
		if err := e.k8s.Get(context.Background(), client.ObjectKey{Name: want.Name}, &live); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(live.Spec.Names, want.Spec.Names) {
			t.Errorf("CRD %s names after apply-crds: %+v, want the embedded %+v", want.Name, live.Spec.Names, want.Spec.Names)
		}
	}
}

// TestHelmInstall installs the chart into the local control plane with the Helm SDK over
// an older CRD, runs its pod as a kubelet would (the apply-crds init container, then the
// manager, from the binary, with the rendered args and env, as the rendered
// ServiceAccount bound by the rendered RBAC), and checks:
//   - the init container upgraded the CRD server-side (Helm skips an existing crds/),
//     and set the names of the AnalysisTemplate CRDs, whose category an older release
//     had and Helm's create still owns;
//   - the manager made its webhook certificate, pointed the CRD at its Service with the
//     CA, and serves /convert for that name; the API server then converts through it
//     (reached through a proxy standing in for the Service network);
//   - a DGD rolls to a new image under the invariant watcher (e2e.Watch);
//   - its metrics carry the series the chart's PrometheusRule uses, whose rules a real
//     Prometheus loads and evaluates against them;
//   - helm upgrade to namespace-scoped mode: the init container re-applies the CRD
//     without disturbing the caBundle; the manager, now under a ClusterRole for its CRD
//     and Roles, rolls the DGD of its namespace, and leaves a DGD of another alone;
//   - helm uninstall removes the release and keeps the CRD and the DGDs.
func TestHelmInstall(t *testing.T) {
	e := getEnv(t)
	ctx := context.Background()
	begin := time.Now()
	e.deleteCRD(t)
	old := olderCRD(t)
	if err := e.k8s.Create(ctx, old, client.FieldOwner("helm")); err != nil {
		t.Fatal(err)
	}
	for _, c := range olderTemplateCRDs(t) {
		e.deleteCRDNamed(t, c.Name)
		if err := e.k8s.Create(ctx, c, client.FieldOwner("helm")); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: graphNS}}); err != nil {
		t.Fatal(err)
	}

	// helm install.
	c := loadChart(t)
	cfg := helmConfig(t, e)
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace = release, releaseNS, true
	vals := values(t, `image: {tag: test}`)
	rel, err := install.Run(c, vals)
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	checkReleaseSize(t, e)
	checkRuleScopes(t, e, rel.Manifest)

	// The pod.
	pod := podOf(t, rel.Manifest)
	if pod.InitContainers[0].Image != "dgd-rollout:test" || pod.Containers[0].Image != "dgd-rollout:test" {
		t.Errorf("images %s, %s", pod.InitContainers[0].Image, pod.Containers[0].Image)
	}
	op := e.startPod(t, pod, releaseNS)
	live := e.crd(t)
	embedded := embeddedDGDCRD(t)
	for i, v := range live.Spec.Versions {
		if want := embedded.Spec.Versions[i]; !equality.Semantic.DeepEqual(v, want) {
			t.Errorf("CRD version %s is not the embedded one after apply-crds", v.Name)
		}
	}
	if !managedBy(live, app.CRDFieldManager) {
		t.Errorf("CRD fields not owned by %s: %v", app.CRDFieldManager, managers(live))
	}
	e.checkNames(t)
	svc := release + "-webhook-service"
	var secret corev1.Secret
	if err := e.k8s.Get(ctx, client.ObjectKey{Namespace: releaseNS, Name: release + "-webhook-cert"}, &secret); err != nil {
		t.Fatalf("the manager's webhook Secret: %v", err)
	}
	ca := e.checkWebhook(t, svc, releaseNS, op.port(t, "webhook-server"))
	restore := e.conversionVia(t, svc, releaseNS, op.port(t, "webhook-server"), ca)

	// A DGD rolled under the invariant watcher.
	d := gpus(harness.NewDGD(graphNS, "agg").Disagg(2, 1, "vllm:v1").Obj())
	w, err := e2e.Watch(ctx, e.cl.Config, graphNS, d.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := e.k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	e.waitRolledOut(t, graphNS, d.Name, 1, op)
	if err := harness.UpdateBeta(ctx, e.k8s, graphNS, d.Name, harness.BetaImage("vllm:v2")); err != nil {
		t.Fatal(err)
	}
	e.waitRolledOut(t, graphNS, d.Name, 2, op)
	w.Stop()
	if v := w.Violations(); len(v) > 0 {
		t.Errorf("invariant violations: %v", v)
	}
	checkMetrics(t, op)
	checkForbidden(t, op)

	// helm upgrade to namespace-scoped mode.
	op.stop()
	restore()
	before := e.crd(t).Spec.Conversion.Webhook.ClientConfig.CABundle
	up := action.NewUpgrade(cfg)
	up.Namespace = releaseNS
	vals = values(t, fmt.Sprintf(`{image: {tag: test}, watchNamespaces: [%s]}`, graphNS))
	rel, err = up.Run(release, c, vals)
	if err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	checkNamespacedRBAC(t, e)
	pod = podOf(t, rel.Manifest)
	kc := e.saKubeconfig(t, releaseNS, pod.ServiceAccountName)
	e.run(t, prepare(t, pod.InitContainers[0], releaseNS, kc))
	if got := e.crd(t).Spec.Conversion.Webhook.ClientConfig; string(got.CABundle) != string(before) || got.Service == nil || got.Service.Name != svc {
		t.Errorf("re-applying the CRD changed its conversion: %+v", got)
	}
	op = e.startPod(t, pod, releaseNS)
	e.conversionVia(t, svc, releaseNS, op.port(t, "webhook-server"), e.checkWebhook(t, svc, releaseNS, op.port(t, "webhook-server")))
	if err := e.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}); err != nil {
		t.Fatal(err)
	}
	other := gpus(harness.NewDGD("elsewhere", "other").Disagg(1, 1, "vllm:v1").Obj())
	if err := e.k8s.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	w, err = e2e.Watch(ctx, e.cl.Config, graphNS, d.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := harness.UpdateBeta(ctx, e.k8s, graphNS, d.Name, harness.BetaImage("vllm:v3")); err != nil {
		t.Fatal(err)
	}
	e.waitRolledOut(t, graphNS, d.Name, 3, op)
	w.Stop()
	if v := w.Violations(); len(v) > 0 {
		t.Errorf("namespace-scoped: invariant violations: %v", v)
	}
	if err := e.k8s.Get(ctx, client.ObjectKeyFromObject(other), other); err != nil || other.Status.ObservedGeneration != 0 {
		t.Errorf("namespace-scoped: the DGD in namespace elsewhere was reconciled (%v, %s)", err, e2e.Summary(other))
	}
	checkForbidden(t, op)
	if l := op.logHas("storage migrated"); len(l) > 0 {
		t.Errorf("namespace-scoped: storage migration ran: %v", l)
	}

	// helm uninstall keeps the CRD and the DGDs.
	op.stop()
	if _, err := action.NewUninstall(cfg).Run(release); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	for _, o := range []client.Object{&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNS, Name: release}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: release + "-manager"}}} {
		if err := e.k8s.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("after helm uninstall, %T %s: %v", o, o.GetName(), err)
		}
	}
	var beta v1beta1.DynamoGraphDeployment // the storage version: no conversion needed
	if err := e.k8s.Get(ctx, client.ObjectKey{Namespace: graphNS, Name: d.Name}, &beta); err != nil {
		t.Errorf("after helm uninstall, the DGD: %v", err)
	}
	e.crd(t)
	for _, o := range []client.Object{&beta, &v1beta1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "other"}}} {
		if err := e.k8s.Delete(ctx, o); err != nil {
			t.Error(err)
		}
	}
	t.Logf("install, roll, upgrade, roll, uninstall: %s", time.Since(begin).Round(time.Second))
}

func managers(o metav1.Object) []string {
	var out []string
	for _, m := range o.GetManagedFields() {
		out = append(out, m.Manager+"/"+string(m.Operation))
	}
	return out
}

func managedBy(o metav1.Object, manager string) bool {
	for _, m := range o.GetManagedFields() {
		if m.Manager == manager && m.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

// checkReleaseSize: Helm keeps the release (chart, crds/ included) gzipped in a Secret,
// which may hold 1 MiB; the 1.5 MB CRD must compress under it.
func checkReleaseSize(t *testing.T, e *env) {
	t.Helper()
	var secrets corev1.SecretList
	if err := e.k8s.List(context.Background(), &secrets, client.InNamespace(releaseNS), client.MatchingLabels{"owner": "helm", "name": release}); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		n := len(s.Data["release"])
		t.Logf("Helm release Secret %s: %d bytes", s.Name, n)
		if n > 900<<10 {
			t.Errorf("the release Secret %s holds %d bytes: close to the 1 MiB a Secret may hold", s.Name, n)
		}
	}
	if len(secrets.Items) == 0 {
		t.Error("no Helm release Secret")
	}
}

// checkRuleScopes: every rule of the chart's ClusterRole names resources whose scope is
// what hack/chartrbac assumed (cluster-scoped ones are only the CRD's), by the API
// server's discovery.
func checkRuleScopes(t *testing.T, e *env, manifest string) {
	t.Helper()
	objs, err := decode([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	cr := into[rbacv1.ClusterRole](t, find(objs, "ClusterRole", "", release+"-manager"))
	clusterRules := chartClusterRules(t)
	lists, err := e.cs.Discovery().ServerPreferredResources()
	if err != nil {
		t.Logf("discovery: %v", err) // an aggregated API missing is not ours
	}
	namespaced := map[string]bool{}
	for _, l := range lists {
		gv := strings.Split(l.GroupVersion, "/")
		group := ""
		if len(gv) == 2 {
			group = gv[0]
		}
		for _, r := range l.APIResources {
			namespaced[group+"/"+r.Name] = r.Namespaced
		}
	}
	for _, r := range cr.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				base, _, _ := strings.Cut(res, "/")
				ns, known := namespaced[g+"/"+base]
				if !known {
					continue // a CRD not installed here (LeaderWorkerSet, Grove)
				}
				if cluster := clusterRules[g+"/"+base]; ns == cluster {
					t.Errorf("%s %s: namespaced=%v, but hack/chartrbac puts it with the %s rules", g, res, ns, map[bool]string{true: "cluster", false: "namespaced"}[cluster])
				}
			}
		}
	}
}

// checkNamespacedRBAC: after the upgrade to namespace-scoped mode, the ClusterRole
// grants only cluster-scoped resources (our CRDs, ClusterAnalysisTemplates), and the
// watched namespace has the Role.
func checkNamespacedRBAC(t *testing.T, e *env) {
	t.Helper()
	var cr rbacv1.ClusterRole
	if err := e.k8s.Get(context.Background(), client.ObjectKey{Name: release + "-manager"}, &cr); err != nil {
		t.Fatal(err)
	}
	cluster := chartClusterRules(t)
	for _, r := range cr.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if base, _, _ := strings.Cut(res, "/"); !cluster[g+"/"+base] {
					t.Errorf("namespace-scoped ClusterRole has %s %s, which is not cluster-scoped", g, res)
				}
			}
		}
	}
	var role rbacv1.Role
	if err := e.k8s.Get(context.Background(), client.ObjectKey{Namespace: graphNS, Name: release + "-manager"}, &role); err != nil {
		t.Errorf("the watched namespace's Role: %v", err)
	}
}

// checkForbidden fails on any RBAC refusal in the manager's log.
func checkForbidden(t *testing.T, op *container) {
	t.Helper()
	if l := op.logHas("forbidden"); len(l) > 0 {
		t.Errorf("the manager was refused by RBAC:\n%s", strings.Join(l, "\n"))
	}
}

// metricNames are the names of the series the operator defines (controllers/metrics.go).
func metricNames() map[string]bool {
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	out := map[string]bool{}
	for _, c := range []prometheus.Collector{controllers.RolloutSteps, controllers.RolloutPhase, controllers.RolloutDuration,
		controllers.RolloutCurrentStep, controllers.RevisionsKept, controllers.ReconcileErrors, controllers.StaleReads, controllers.AnalysisMeasurements} {
		ch := make(chan *prometheus.Desc, 4)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			if m := re.FindStringSubmatch(d.String()); m != nil {
				out[m[1]] = true
			}
		}
	}
	return out
}

// checkMetrics: the manager's /metrics has the DGD's series, every series the chart's
// PrometheusRule names is one the operator defines, and a real Prometheus loads the rules
// and evaluates them against the manager's metrics without an error.
func checkMetrics(t *testing.T, op *container) {
	t.Helper()
	port := op.port(t, "metrics")
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, s := range []string{`dgd_rollout_steps_total{name="agg",namespace="graphs"}`, `dgd_rollout_phase{name="agg",namespace="graphs",phase="Completed"} 1`} {
		if !strings.Contains(string(body), s) {
			t.Errorf("the manager's /metrics has no %s", s)
		}
	}

	objs := render(t, release, releaseNS, values(t, `metrics: {prometheusRule: {enabled: true, stalledAfter: 2m}}`))
	rule := find(objs, "PrometheusRule", releaseNS, release)
	if rule == nil {
		t.Fatal("no PrometheusRule rendered")
	}
	spec, _ := json.Marshal(rule.Object["spec"])
	defined := metricNames()
	var alerts []string
	for _, name := range regexp.MustCompile(`\bdgd_[a-z_]+`).FindAllString(string(spec), -1) {
		if !defined[name] {
			t.Errorf("the PrometheusRule uses %s, which the operator does not export", name)
		}
	}
	for _, m := range regexp.MustCompile(`"alert":"([A-Za-z]+)"`).FindAllStringSubmatch(string(spec), -1) {
		alerts = append(alerts, m[1])
	}
	for _, want := range []string{"DGDRolloutAborted", "DGDRolloutFailed", "DGDRolloutStalled", "DGDReconcileErrors"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s in %v", want, alerts)
		}
	}
	y, err := yaml.JSONToYAML(spec)
	if err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, y, 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := prom.Start(context.Background(), prom.Options{Targets: []string{fmt.Sprintf("127.0.0.1:%d", port)}, RuleFiles: []string{rules}, ScrapeInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatalf("Prometheus with the chart's rules: %v", err)
	}
	defer func() { _ = srv.Close() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		health, err := ruleHealth(srv.URL)
		evaluated := err == nil && len(health) == len(alerts)
		for _, h := range health {
			evaluated = evaluated && h == "ok"
		}
		if evaluated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the chart's rules in Prometheus: %v %v", health, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ruleHealth is the health of every rule Prometheus evaluated (after an evaluation:
// "ok", or "err" with the query's error), by rule name.
func ruleHealth(base string) (map[string]string, error) {
	resp, err := http.Get(base + "/api/v1/rules")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name           string    `json:"name"`
					Health         string    `json:"health"`
					LastError      string    `json:"lastError"`
					LastEvaluation time.Time `json:"lastEvaluation"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	h := map[string]string{}
	for _, g := range out.Data.Groups {
		for _, r := range g.Rules {
			if !r.LastEvaluation.IsZero() {
				h[r.Name] = r.Health + r.LastError
			}
		}
	}
	return h, nil
}

// chartClusterRules reads which resources hack/chartrbac put in the chart's cluster rules
// (the "dgd-rollout.rules.cluster" define of templates/_rbac_rules.tpl), as group/resource.
func chartClusterRules(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir(), "templates", "_rbac_rules.tpl"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(raw), `{{- define "dgd-rollout.rules.cluster" }}`)
	body, _, ok2 := strings.Cut(body, "{{- end }}")
	if !ok || !ok2 {
		t.Fatal("_rbac_rules.tpl has no dgd-rollout.rules.cluster define")
	}
	var rules []rbacv1.PolicyRule
	if err := yaml.UnmarshalStrict([]byte(body), &rules); err != nil {
		t.Fatalf("the chart's cluster rules: %v", err)
	}
	out := map[string]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				base, _, _ := strings.Cut(res, "/")
				out[g+"/"+base] = true
			}
		}
	}
	return out
}
