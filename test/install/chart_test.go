package install

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"

	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/test/cluster"
)

// The chart's tests render it with the Helm SDK (helm.sh/helm/v3 v3.21.4: the newest
// Helm 3 on this module's Kubernetes libraries, v0.36.2; v3.22.0 needs v0.37), lint it
// with the SDK's lint package (what `helm lint` runs), and check what it renders against
// config/rbac and config/crd; helm_test.go installs it into the local control plane.

func chartDir() string { return filepath.Join(cluster.RepoRoot(), "charts", "dgd-rollout") }

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// values parses YAML into chart values.
func values(t *testing.T, y string) map[string]any {
	t.Helper()
	v := map[string]any{}
	if err := yaml.Unmarshal([]byte(y), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// render renders the chart as `helm template` does for release name in namespace ns.
func render(t *testing.T, name, ns string, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := renderErr(loadChart(t), name, ns, vals)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func renderErr(c *chart.Chart, name, ns string, vals map[string]any) ([]*unstructured.Unstructured, error) {
	rv, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{Name: name, Namespace: ns, IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(c, rv)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for f := range files {
		if strings.HasSuffix(f, ".yaml") {
			names = append(names, f)
		}
	}
	sort.Strings(names)
	var out []*unstructured.Unstructured
	for _, f := range names {
		objs, err := decode([]byte(files[f]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// decode reads every object of a multi-document YAML stream.
func decode(raw []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

func find(objs []*unstructured.Unstructured, kind, ns, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
			return o
		}
	}
	return nil
}

func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func into[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	if u == nil {
		t.Fatalf("no %T rendered", new(T))
	}
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return &out
}

// fullValues turns every option of the chart on.
const fullValues = `
watchNamespaces: [team-a, team-b]
webhook: {certMode: cert-manager}
platform: {natsServer: "nats://nats.dynamo:4222", etcdEndpoints: "http://etcd.dynamo:2379", discoveryBackend: etcd, prometheusEndpoint: "http://prom:9090", modelExpressURL: "http://mx:8080"}
analysis: {prometheus: {url: "https://prom.monitoring:9091", bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token, caFile: /etc/prom-ca/ca.crt}}
metrics: {serviceMonitor: {enabled: true, labels: {release: prom}}, prometheusRule: {enabled: true}, grafanaDashboard: {enabled: true, annotations: {grafana_folder: Dynamo}}}
extraArgs: [--pprof-bind-address=127.0.0.1:6060]
extraVolumes: [{name: prom-ca, configMap: {name: prom-ca}}]
extraVolumeMounts: [{name: prom-ca, mountPath: /etc/prom-ca, readOnly: true}]
`

// TestChartLint runs Helm's linter (the SDK's lint package, as `helm lint --strict`)
// on the chart with its defaults and with every option on: no warning, no error.
func TestChartLint(t *testing.T) {
	for name, v := range map[string]map[string]any{"defaults": {}, "every option": values(t, fullValues)} {
		l := lint.All(chartDir(), v, "dgd-rollout-system", false)
		for _, m := range l.Messages {
			if m.Severity > support.InfoSev {
				t.Errorf("%s: %s", name, m)
			}
		}
	}
	for bad, want := range map[string]string{
		`webhook: {certMode: cert-magic}`:                                       "webhook.certMode",
		`platform: {discoveryBackend: etcd}`:                                    "platform.etcdEndpoints",
		`{replicas: 2, leaderElection: {enabled: false}}`:                       "leaderElection.enabled",
		`metrics: {service: {enabled: false}, serviceMonitor: {enabled: true}}`: "metrics.service.enabled",
	} {
		if _, err := renderErr(loadChart(t), "r", "x", values(t, bad)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("values %s: %v, want an error naming %s", bad, err, want)
		}
	}
}

// TestChartCRDs: the chart's crds/ is config/crd/bases (links), which Helm loads: the
// DGD's CRD and the analysis templates'.
func TestChartCRDs(t *testing.T) {
	c := loadChart(t)
	crds := c.CRDObjects()
	bases, err := filepath.Glob(filepath.Join(cluster.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) != len(bases) || len(bases) != 3 {
		t.Fatalf("%d CRDs in crds/, %d in config/crd/bases, want 3", len(crds), len(bases))
	}
	for _, crd := range crds {
		want, err := os.ReadFile(filepath.Join(cluster.RepoRoot(), "config", "crd", "bases", filepath.Base(crd.Name)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(crd.File.Data, want) {
			t.Errorf("crds/%s is not config/crd/bases' CRD", crd.Name)
		}
	}
}

// ruleSet flattens rules to one "group resource name verb" line per permission, to
// compare rule lists however they are grouped.
func ruleSet(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{"*"}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, n := range names {
					for _, v := range r.Verbs {
						out = append(out, strings.Join([]string{g, res, n, v}, " "))
					}
				}
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func rbacRules(t *testing.T, file, kind string) []rbacv1.PolicyRule {
	t.Helper()
	objs, err := cluster.ReadObjects(filepath.Join(cluster.RepoRoot(), "config", "rbac", file))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == kind {
			if kind == "Role" {
				return into[rbacv1.Role](t, o).Rules
			}
			return into[rbacv1.ClusterRole](t, o).Rules
		}
	}
	t.Fatalf("no %s in config/rbac/%s", kind, file)
	return nil
}

// TestChartRBAC: the rendered RBAC grants exactly config/rbac's permissions. Cluster-wide:
// the ClusterRole holds every rule of role.yaml; namespace-scoped: the ClusterRole only
// the CRD's rules, each watched namespace a Role with all the others (together:
// role.yaml), the release namespace in both modes the leader election rules and role.yaml's
// Role of the operator's namespace (the webhook certificate's Secret, under the chart's
// name for it).
func TestChartRBAC(t *testing.T) {
	manager := ruleSet(rbacRules(t, "role.yaml", "ClusterRole"))
	// role.yaml's Role names the Secret dgd-rollout-webhook-cert (config/manager's); the
	// chart's is <fullname>-webhook-cert, the same for a release named dgd-rollout.
	leader := ruleSet(append(rbacRules(t, "leader_election_role.yaml", "Role"), rbacRules(t, "role.yaml", "Role")...))

	objs := render(t, "dgd-rollout", "ops", nil)
	cr := into[rbacv1.ClusterRole](t, find(objs, "ClusterRole", "", "dgd-rollout-manager"))
	if got := ruleSet(cr.Rules); !slices.Equal(got, manager) {
		t.Errorf("cluster-wide ClusterRole:\n%s\nwant config/rbac/role.yaml's:\n%s", strings.Join(got, "\n"), strings.Join(manager, "\n"))
	}
	if got := ruleSet(into[rbacv1.Role](t, find(objs, "Role", "ops", "dgd-rollout-leader-election")).Rules); !slices.Equal(got, leader) {
		t.Errorf("leader election Role: %v, want %v", got, leader)
	}
	if n := len(ofKind(objs, "Role")); n != 1 {
		t.Errorf("cluster-wide: %d Roles, want the leader election one", n)
	}
	crb := into[rbacv1.ClusterRoleBinding](t, find(objs, "ClusterRoleBinding", "", "dgd-rollout-manager"))
	if s := crb.Subjects; len(s) != 1 || s[0].Name != "dgd-rollout" || s[0].Namespace != "ops" || crb.RoleRef.Name != cr.Name {
		t.Errorf("ClusterRoleBinding %+v", crb)
	}

	objs = render(t, "dgd-rollout", "ops", values(t, `watchNamespaces: [team-a, team-b]`))
	cluster := ruleSet(into[rbacv1.ClusterRole](t, find(objs, "ClusterRole", "", "dgd-rollout-manager")).Rules)
	for _, p := range cluster {
		ourCRD := false
		for _, name := range []string{"dynamographdeployments", "analysistemplates", "clusteranalysistemplates"} {
			ourCRD = ourCRD || strings.HasPrefix(p, "apiextensions.k8s.io customresourcedefinitions") && strings.Contains(p, " "+name+".nvidia.com ")
		}
		if !ourCRD && !strings.HasPrefix(p, "nvidia.com clusteranalysistemplates * ") {
			t.Errorf("namespace-scoped ClusterRole grants %q: only our CRDs and ClusterAnalysisTemplates need cluster scope", p)
		}
	}
	for _, ns := range []string{"team-a", "team-b"} {
		role := into[rbacv1.Role](t, find(objs, "Role", ns, "dgd-rollout-manager"))
		got := ruleSet(role.Rules)
		if union := slices.Compact(slices.Sorted(slices.Values(append(append([]string{}, got...), cluster...)))); !slices.Equal(union, manager) {
			t.Errorf("%s: Role and ClusterRole together grant\n%s\nwant role.yaml's\n%s", ns, strings.Join(union, "\n"), strings.Join(manager, "\n"))
		}
		if rb := into[rbacv1.RoleBinding](t, find(objs, "RoleBinding", ns, "dgd-rollout-manager")); rb.Subjects[0].Namespace != "ops" {
			t.Errorf("%s: RoleBinding subject %+v", ns, rb.Subjects)
		}
	}
	if got := ruleSet(into[rbacv1.Role](t, find(objs, "Role", "ops", "dgd-rollout-leader-election")).Rules); !slices.Equal(got, leader) {
		t.Errorf("namespace-scoped: the release namespace's Role: %v, want %v", got, leader)
	}
}

// managerFlags are the flags `manager [apply-crds] --help` lists.
func managerFlags(t *testing.T, sub ...string) map[string]bool {
	t.Helper()
	bin, err := managerBinary()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(bin, append(sub, "--help")...).CombinedOutput() // exits 2 after the usage
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if len(flags) < 5 {
		t.Fatalf("manager %v --help listed %d flags:\n%s", sub, len(flags), out)
	}
	return flags
}

func checkFlags(t *testing.T, what string, args []string, known map[string]bool) {
	t.Helper()
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !known[name] {
			t.Errorf("%s passes %q, which the manager does not take", what, a)
		}
	}
}

// TestChartWiring renders the chart with every option on and checks that its pieces
// fit: every flag it passes is one the binary takes; the webhook and metrics Services
// select the manager's pods and name its ports; the ServiceMonitor selects the metrics
// Service's port; with cert-manager, the Certificate's Secret is what the manager
// mounts at its cert dir, its names are the webhook Service's, and the init container
// annotates the CRD with that Certificate.
func TestChartWiring(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the manager")
	}
	const ns = "ops"
	objs := render(t, "r", ns, values(t, fullValues))
	dep := into[appsv1.Deployment](t, find(objs, "Deployment", ns, "r-dgd-rollout"))
	pod := dep.Spec.Template
	manager, initc := pod.Spec.Containers[0], pod.Spec.InitContainers[0]
	checkFlags(t, "the manager container", manager.Args, managerFlags(t))
	checkFlags(t, "the apply-crds init container", initc.Args, managerFlags(t, "apply-crds"))
	if !slices.Equal(initc.Command, []string{"/manager", "apply-crds"}) || initc.Image != manager.Image {
		t.Errorf("init container %v %s, manager image %s", initc.Command, initc.Image, manager.Image)
	}
	arg := func(c corev1.Container, flag string) string {
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--"+flag+"="); ok {
				return v
			}
		}
		return ""
	}
	ports := map[string]bool{}
	for _, p := range manager.Ports {
		ports[p.Name] = true
	}
	for _, svc := range ofKind(objs, "Service") {
		s := into[corev1.Service](t, svc)
		for k, v := range s.Spec.Selector {
			if pod.Labels[k] != v {
				t.Errorf("Service %s selects %s=%s, which the manager's pods lack", s.Name, k, v)
			}
		}
		for _, p := range s.Spec.Ports {
			if !ports[p.TargetPort.String()] {
				t.Errorf("Service %s targets port %s, which the manager does not name", s.Name, p.TargetPort.String())
			}
		}
	}
	webhookSvc := arg(manager, "webhook-service-name")
	if find(objs, "Service", ns, webhookSvc) == nil || arg(initc, "webhook-service-name") != webhookSvc {
		t.Errorf("the manager's and init container's webhook Service %q, %q: not rendered", webhookSvc, arg(initc, "webhook-service-name"))
	}
	sm := find(objs, "ServiceMonitor", ns, "r-dgd-rollout")
	metrics := into[corev1.Service](t, find(objs, "Service", ns, "r-dgd-rollout-metrics"))
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range sel {
		if metrics.Labels[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s, which the metrics Service lacks", k, v)
		}
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 || eps[0].(map[string]any)["port"] != metrics.Spec.Ports[0].Name {
		t.Errorf("ServiceMonitor endpoints %v, metrics Service port %s", eps, metrics.Spec.Ports[0].Name)
	}

	cert := find(objs, "Certificate", ns, "r-dgd-rollout-webhook")
	if cert == nil || find(objs, "Issuer", ns, "r-dgd-rollout-selfsigned") == nil {
		t.Fatal("cert-manager mode renders no Certificate or Issuer")
	}
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if want := app.DNSNames(webhookSvc, ns); !slices.Equal(dns, want) {
		t.Errorf("Certificate dnsNames %v, want the webhook Service's %v", dns, want)
	}
	if arg(manager, "webhook-cert-mode") != app.CertManager || arg(initc, "inject-ca-from") != ns+"/"+cert.GetName() {
		t.Errorf("cert-manager mode: manager %q, init container inject-ca-from %q", arg(manager, "webhook-cert-mode"), arg(initc, "inject-ca-from"))
	}
	certDir := arg(manager, "webhook-cert-dir")
	mounted := false
	for _, m := range manager.VolumeMounts {
		for _, v := range pod.Spec.Volumes {
			if v.Name == m.Name && m.MountPath == certDir && v.Secret != nil && v.Secret.SecretName == secretName {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("the Certificate's Secret %s is not mounted at --webhook-cert-dir %s", secretName, certDir)
	}
	if sc := manager.SecurityContext; sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || pod.Spec.SecurityContext.RunAsNonRoot == nil || !*pod.Spec.SecurityContext.RunAsNonRoot {
		t.Errorf("the manager is not non-root with a read-only root filesystem: %+v %+v", sc, pod.Spec.SecurityContext)
	}
}
