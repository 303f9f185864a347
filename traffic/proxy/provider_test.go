package proxy_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/auth/rbac/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/traffic"
	"github.com/dgd-rollout/operator/traffic/proxy"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from this run's output")

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func render(t *testing.T, tr traffic.Traffic) traffic.Rendered {
	t.Helper()
	r, err := proxy.Provider{}.Objects(tr)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// asYAML is every object of r, Apply then Create, as YAML documents.
func asYAML(t *testing.T, r traffic.Rendered) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, o := range slices.Concat(r.Apply, r.Create) {
		y, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes()
}

// TestObjectsGolden: a 90/10 split with a header route renders the objects of
// testdata/objects.golden, in order (RBAC, the desired ConfigMap, the Deployment; the
// status ConfigMap to create).
func TestObjectsGolden(t *testing.T) {
	got := asYAML(t, render(t, trafficOf(90, 10, withHeaderRoute("X-Canary", "1"))))
	path := filepath.Join("testdata", "objects.golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("rendered objects (-golden +got; go test -update rewrites it):\n%s", diff)
	}
}

// TestObjectsDeterministic: one Traffic renders the same bytes every time, whatever the
// order of its cohorts (the controller writes only what differs).
func TestObjectsDeterministic(t *testing.T) {
	tr := trafficOf(70, 30, withHeaderRoute("x-canary", "a,b"))
	first := asYAML(t, render(t, tr))
	for i := 0; i < 20; i++ {
		shuffled := tr
		shuffled.Cohorts = []traffic.Cohort{tr.Cohorts[1], tr.Cohorts[0]}
		if got := asYAML(t, render(t, shuffled)); !bytes.Equal(first, got) {
			t.Fatalf("render %d differs:\n%s", i, cmp.Diff(string(first), string(got)))
		}
	}
}

func objectOf[T client.Object](t *testing.T, objs []client.Object) T {
	t.Helper()
	for _, o := range objs {
		if v, ok := o.(T); ok {
			return v
		}
	}
	var zero T
	t.Fatalf("no %T rendered", zero)
	return zero
}

// TestDeploymentNeverCarriesTheSplit: weights and header routes change the desired
// ConfigMap only; the Deployment of 90/10 is that of 0/100 with a header route, so a
// weight change restarts no proxy pod.
func TestDeploymentNeverCarriesTheSplit(t *testing.T) {
	a := objectOf[*appsv1.Deployment](t, render(t, trafficOf(90, 10)).Apply)
	b := objectOf[*appsv1.Deployment](t, render(t, trafficOf(0, 100, withHeaderRoute("x", "y"))).Apply)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("Deployment changed with the split (-90/10 +0/100):\n%s", diff)
	}
}

// TestDeploymentKnobs: replicas, HAProxy's image and the drain timeout from the DGD, or
// the operator's image, or the defaults.
func TestDeploymentKnobs(t *testing.T) {
	type knobs struct {
		Replicas     int32
		Image, Agent string
		Grace        int64
		DrainFlag    string
	}
	cases := map[string]struct {
		traffic traffic.Traffic
		want    knobs
	}{
		"defaults": {trafficOf(100, 0), knobs{2, "docker.io/library/haproxy:2.6", "registry.example.com/dgd-rollout:0.2.0", 3605, "--drain-timeout=3600s"}},
		"the operator's proxy image": {trafficOf(100, 0, func(t *traffic.Traffic) { t.Config.ProxyImage = "mirror.local/haproxy:2.6.12" }),
			knobs{2, "mirror.local/haproxy:2.6.12", "registry.example.com/dgd-rollout:0.2.0", 3605, "--drain-timeout=3600s"}},
		"the DGD's proxy spec wins": {trafficOf(100, 0, func(t *traffic.Traffic) { t.Config.ProxyImage = "mirror.local/haproxy:2.6.12" },
			withProxy(v1alpha1.ProxyRouting{Image: "haproxy:2.8", Replicas: ptr.To(int32(5)), DrainTimeoutSeconds: ptr.To(int32(120))})),
			knobs{5, "haproxy:2.8", "registry.example.com/dgd-rollout:0.2.0", 125, "--drain-timeout=120s"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			d := objectOf[*appsv1.Deployment](t, render(t, c.traffic).Apply)
			spec := d.Spec.Template.Spec
			agent := spec.InitContainers[0]
			var drain string
			for _, a := range agent.Args {
				if strings.HasPrefix(a, "--drain-timeout=") {
					drain = a
				}
			}
			got := knobs{*d.Spec.Replicas, spec.Containers[0].Image, agent.Image, *spec.TerminationGracePeriodSeconds, drain}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestSplitLeavesOutCohortsWithoutAddress: a cohort whose Service has no cluster IP yet
// is not in the desired split, nor is a header route to it.
func TestSplitLeavesOutCohortsWithoutAddress(t *testing.T) {
	cm := objectOf[*corev1.ConfigMap](t, render(t, trafficOf(90, 10, withHeaderRoute("x-canary", "1"), withoutAddress(candidate))).Apply)
	want := `{"cohorts":[{"hash":"6d5f7c1a","address":"10.96.12.7","port":8000,"weight":90}]}`
	if diff := cmp.Diff(want, cm.Data[proxy.SplitKey]); diff != "" {
		t.Errorf("split (-want +got):\n%s", diff)
	}
	s, version, err := proxy.ParseSplit(cm.Data)
	if err != nil || version != s.Version() {
		t.Errorf("ParseSplit = %+v, %q, %v", s, version, err)
	}
}

// TestObjectsRefuses: a Traffic the agent could not carry is an error naming it.
func TestObjectsRefuses(t *testing.T) {
	cases := map[string]struct {
		traffic traffic.Traffic
		want    string
	}{
		"no agent image":         {trafficOf(90, 10, func(t *traffic.Traffic) { t.Config.AgentImage = "" }), "no agent image"},
		"a weight over 100":      {trafficOf(90, 101), "weight 101 is not a percent"},
		"a port of 0":            {trafficOf(90, 10, func(t *traffic.Traffic) { t.Cohorts[0].Port = 0 }), "port 0"},
		"a hash with upper case": {trafficOf(90, 10, func(t *traffic.Traffic) { t.Cohorts[0].Hash = "ABC" }), `cohort "ABC"`},
		"one cohort twice":       {trafficOf(90, 10, func(t *traffic.Traffic) { t.Cohorts[1].Hash = stable }), "listed twice"},
		"a header route to no cohort": {trafficOf(90, 10, func(t *traffic.Traffic) {
			t.HeaderRoute = &traffic.HeaderRoute{Name: "x", Value: "y", Hash: "0000aaaa"}
		}), `names cohort "0000aaaa"`},
		"a header value with a space": {trafficOf(90, 10, withHeaderRoute("x-canary", "a b")), "not an HTTP field name"},
		"a header name with a colon":  {trafficOf(90, 10, withHeaderRoute("x:canary", "1")), "not an HTTP field name"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := proxy.Provider{}.Objects(c.traffic)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Objects = %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// TestRoleGrantsNothingMore: the Role covers exactly get, list and watch of the desired
// ConfigMap and get and patch of the status ConfigMap, judged by Kubernetes' own rule
// comparison (k8s.io/component-helpers auth/rbac/validation Covers, what the API
// server's escalation check uses), and none of the requests next to them.
func TestRoleGrantsNothingMore(t *testing.T) {
	tr := trafficOf(90, 10)
	role := objectOf[*rbacv1.Role](t, render(t, tr).Apply)
	rule := func(name string, verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{name}, Verbs: verbs}
	}
	allowed := []rbacv1.PolicyRule{rule("llm-frontend-proxy", "get", "list", "watch"), rule("llm-frontend-proxy-status", "get", "patch")}
	if ok, missing := validation.Covers(role.Rules, allowed); !ok {
		t.Errorf("the Role does not grant %v", missing)
	}
	if ok, extra := validation.Covers(allowed, role.Rules); !ok {
		t.Errorf("the Role grants more: %v", extra)
	}
	denied := map[string]rbacv1.PolicyRule{
		"every ConfigMap":              {APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}},
		"an update of the split":       rule("llm-frontend-proxy", "update"),
		"a patch of the split":         rule("llm-frontend-proxy", "patch"),
		"an update of the status":      rule("llm-frontend-proxy-status", "update"),
		"a watch of the status":        rule("llm-frontend-proxy-status", "watch"),
		"a delete of the status":       rule("llm-frontend-proxy-status", "delete"),
		"another ConfigMap":            rule("llm-frontend", "get"),
		"a Secret of the split's name": {APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"llm-frontend-proxy"}, Verbs: []string{"get"}},
		"creating ConfigMaps":          {APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
	}
	for name, r := range denied {
		if ok, _ := validation.Covers(role.Rules, []rbacv1.PolicyRule{r}); ok {
			t.Errorf("the Role grants %s", name)
		}
	}
	binding := objectOf[*rbacv1.RoleBinding](t, render(t, tr).Apply)
	wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "llm-frontend-proxy", Namespace: "ns1"}}
	if diff := cmp.Diff(wantSubjects, binding.Subjects); diff != "" || binding.RoleRef.Name != role.Name {
		t.Errorf("RoleBinding binds %v to %s (-want +got subjects):\n%s", binding.Subjects, binding.RoleRef.Name, diff)
	}
}

// TestSelectors: the entry Service, the Deployment and the controller's pod lookup all
// select the proxy's pods, and none selects a frontend pod of the same service.
func TestSelectors(t *testing.T) {
	tr := trafficOf(90, 10)
	p := proxy.Provider{}
	d := objectOf[*appsv1.Deployment](t, render(t, tr).Apply)
	want := map[string]string{v1alpha1.LabelGraph: "llm", v1alpha1.LabelService: "Frontend", proxy.LabelProxy: "true"}
	for name, got := range map[string]map[string]string{"EntrySelector": p.EntrySelector(tr), "PodLabels": p.PodLabels(tr),
		"the Deployment's selector": d.Spec.Selector.MatchLabels} {
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	entry := labels.SelectorFromSet(p.EntrySelector(tr))
	if !entry.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("the entry selector %s does not select the proxy pods %v", entry, d.Spec.Template.Labels)
	}
	frontendPod := labels.Set{v1alpha1.LabelGraph: "llm", v1alpha1.LabelService: "Frontend", v1alpha1.LabelComponentType: "frontend",
		v1alpha1.LabelWorkerHash: candidate, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	if entry.Matches(frontendPod) {
		t.Errorf("the entry selector %s selects a frontend pod", entry)
	}
}

// TestLookups are the status ConfigMap and the Deployment, in the DGD's namespace.
func TestLookups(t *testing.T) {
	var got []string
	for _, o := range (proxy.Provider{}).Lookups(trafficOf(90, 10)) {
		got = append(got, fmt.Sprintf("%T %s/%s", o, o.GetNamespace(), o.GetName()))
	}
	want := []string{"*v1.ConfigMap ns1/llm-frontend-proxy-status", "*v1.Deployment ns1/llm-frontend-proxy"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
