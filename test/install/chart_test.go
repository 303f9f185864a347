package install

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

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
metrics: {serviceMonitor: {enabled: true, labels: {release: prom}}, prometheusRule: {enabled: true}}
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

// TestChartCRDs: the chart's crds/ is config/crd/bases (a link), which Helm loads.
func TestChartCRDs(t *testing.T) {
	c := loadChart(t)
	crds := c.CRDObjects()
	if len(crds) != 1 {
		t.Fatalf("%d CRDs in crds/, want 1", len(crds))
	}
	want, err := os.ReadFile(filepath.Join(cluster.RepoRoot(), "config", "crd", "bases", "nvidia.com_dynamographdeployments.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(crds[0].File.Data, want) {
		t.Errorf("crds/%s is not config/crd/bases' CRD", crds[0].Name)
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
// role.yaml), the release namespace the leader election rules and the webhook Secret's.
func TestChartRBAC(t *testing.T) {
	manager := ruleSet(rbacRules(t, "role.yaml", "ClusterRole"))
	leader := ruleSet(rbacRules(t, "leader_election_role.yaml", "Role"))

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
		if !strings.HasPrefix(p, "apiextensions.k8s.io customresourcedefinitions") || !strings.Contains(p, " dynamographdeployments.nvidia.com ") {
			t.Errorf("namespace-scoped ClusterRole grants %q: only our CRD needs cluster scope", p)
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
	own := ruleSet(into[rbacv1.Role](t, find(objs, "Role", "ops", "dgd-rollout-leader-election")).Rules)
	for _, p := range leader {
		if !slices.Contains(own, p) {
			t.Errorf("namespace-scoped: the release namespace's Role lacks %q", p)
		}
	}
	if !slices.Contains(own, " secrets * create") {
		t.Errorf("namespace-scoped: the release namespace's Role cannot create the webhook's Secret: %v", own)
	}
}
