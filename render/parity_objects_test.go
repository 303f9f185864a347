package render_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/render"
)

// TestParityService: a ClusterIP Service per component (a worker revision's headless:
// this operator's deliberate difference, as its name changes every revision and only
// discovery reads it); frontend port http 8000 →
// targetPort http, others system 9090 → targetPort system (DYNAMO.md "Services",
// notes §5); the two discovery labels under Kubernetes discovery; selector (this
// operator's deliberate choice) graph name + component + component type, plus the
// worker hash on workers and role=leader for LWS leaders.
func TestParityService(t *testing.T) {
	httpPort := []corev1.ServicePort{{Name: "http", Port: 8000, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}}
	systemPort := []corev1.ServicePort{{Name: "system", Port: 9090, TargetPort: intstr.FromString("system"), Protocol: corev1.ProtocolTCP}}
	sel := func(comp, typ string, kv ...string) map[string]string {
		return set(map[string]string{"nvidia.com/dynamo-graph-deployment-name": pDGD, "nvidia.com/dynamo-component": comp,
			"nvidia.com/dynamo-component-type": typ}, kv...)
	}
	etcd := map[string]string{"nvidia.com/dynamo-discovery-backend": "etcd"}
	cases := []struct {
		name, svcName, objName string
		ann                    map[string]string
		s                      *spec
		hash                   string
		leadersOnly            bool
		ports                  []corev1.ServicePort
		selector               map[string]string
		discoveryLabels        bool
		wants                  bool // WantsService
	}{
		{"frontend", "Frontend", "llm-frontend", nil, svc("frontend", img("1.6.0")), "", false,
			httpPort, sel("Frontend", "frontend"), true, true},
		{"decode worker", "VllmWorker", "llm-vllmworker-" + pHash, nil, svc("decode", img("1.6.0")), pHash, false,
			systemPort, sel("VllmWorker", "decode", "nvidia.com/dynamo-worker-hash", pHash), true, true},
		{"multinode worker on LWS: leaders only", "VllmWorker", "llm-vllmworker-" + pHash, nil, svc("worker", img("1.6.0"), nodesOpt(2)), pHash, true,
			systemPort, sel("VllmWorker", "worker", "nvidia.com/dynamo-worker-hash", pHash, "role", "leader"), true, true},
		{"planner", "Planner", "llm-planner", nil, svc("planner", img("1.6.0")), "", false,
			systemPort, sel("Planner", "planner"), true, true},
		{"other type", "Router", "llm-router", nil, svc("router", img("1.6.0")), "", false,
			systemPort, sel("Router", "router"), true, true},
		{"etcd: frontend still has one, without discovery labels", "Frontend", "llm-frontend", etcd, svc("frontend", img("1.6.0")), "", false,
			httpPort, sel("Frontend", "frontend"), false, true},
		{"etcd: a worker has none", "VllmWorker", "llm-vllmworker-" + pHash, etcd, svc("decode", img("1.6.0")), pHash, false,
			systemPort, sel("VllmWorker", "decode", "nvidia.com/dynamo-worker-hash", pHash), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := render.Component{DGD: graph(tc.ann, map[string]*spec{tc.svcName: tc.s}), Name: tc.svcName, Spec: tc.s, Hash: tc.hash}
			diff(t, "WantsService", tc.wants, c.WantsService())
			got := c.Service(tc.objName, tc.leadersOnly)
			diff(t, "name", tc.objName, got.Name)
			diff(t, "namespace", pNS, got.Namespace)
			if got.Spec.Type != "" && got.Spec.Type != corev1.ServiceTypeClusterIP {
				t.Errorf("type %q, want ClusterIP", got.Spec.Type)
			}
			switch headless := got.Spec.ClusterIP == corev1.ClusterIPNone; {
			case tc.hash == "" && headless:
				t.Error("headless, want a ClusterIP Service")
			case tc.hash != "" && !headless:
				t.Errorf("clusterIP %q, want a worker revision's Service headless (None)", got.Spec.ClusterIP)
			}
			diff(t, "ports", tc.ports, got.Spec.Ports)
			diff(t, "selector", tc.selector, got.Spec.Selector)
			want := map[string]string{"nvidia.com/dynamo-discovery-backend": "kubernetes", "nvidia.com/dynamo-discovery-enabled": "true"}
			for k, v := range want {
				if g, ok := got.Labels[k]; tc.discoveryLabels && g != v {
					t.Errorf("label %s = %q, want %q", k, g, v)
				} else if !tc.discoveryLabels && ok {
					t.Errorf("label %s = %q, want absent under etcd discovery", k, g)
				}
			}
		})
	}
}

// TestParityIngress: host `[hostPrefix]host.<hostSuffix or "local">`, one rule path /
// (Prefix) to the Service on port 8000, TLS [{hosts: [host], secretName}] when set,
// class from the spec; none unless enabled (DYNAMO.md, notes §5 GenerateComponentIngress).
func TestParityIngress(t *testing.T) {
	rule := func(host string) []networkingv1.IngressRule {
		return []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: "llm-frontend", Port: networkingv1.ServiceBackendPort{Number: 8000}}}}}}}}}
	}
	cases := []struct {
		name string
		in   *v1alpha1.IngressSpec
		cfg  render.Config
		want *networkingv1.IngressSpec
	}{
		{"host.local with TLS and class",
			&v1alpha1.IngressSpec{Enabled: true, Host: "llm", IngressControllerClassName: ptr.To("nginx"), TLS: &v1alpha1.IngressTLSSpec{SecretName: "llm-tls"}},
			render.Config{},
			&networkingv1.IngressSpec{IngressClassName: ptr.To("nginx"), Rules: rule("llm.local"),
				TLS: []networkingv1.IngressTLS{{Hosts: []string{"llm.local"}, SecretName: "llm-tls"}}}},
		{"hostPrefix and hostSuffix",
			&v1alpha1.IngressSpec{Enabled: true, Host: "llm", HostPrefix: ptr.To("api-"), HostSuffix: ptr.To("example.com"), IngressControllerClassName: ptr.To("nginx")},
			render.Config{IngressHostSuffix: "corp.net"},
			&networkingv1.IngressSpec{IngressClassName: ptr.To("nginx"), Rules: rule("api-llm.example.com")}},
		{"operator's host suffix when the spec gives none",
			&v1alpha1.IngressSpec{Enabled: true, Host: "llm", IngressControllerClassName: ptr.To("traefik")},
			render.Config{IngressHostSuffix: "corp.net"},
			&networkingv1.IngressSpec{IngressClassName: ptr.To("traefik"), Rules: rule("llm.corp.net")}},
		{"disabled", &v1alpha1.IngressSpec{Enabled: false, Host: "llm", IngressControllerClassName: ptr.To("nginx")}, render.Config{}, nil},
		{"no ingress", nil, render.Config{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := svc("frontend", img("1.6.0"), func(s *spec) { s.Ingress = tc.in })
			c := render.Component{DGD: graph(nil, map[string]*spec{"Frontend": s}), Name: "Frontend", Spec: s, Config: tc.cfg}
			got := c.Ingress("llm-frontend", "llm-frontend")
			if tc.want == nil {
				if got != nil {
					t.Errorf("got an Ingress %+v, want none", got.Spec)
				}
				return
			}
			if got == nil {
				t.Fatal("no Ingress")
			}
			diff(t, "name/namespace", []string{"llm-frontend", pNS}, []string{got.Name, got.Namespace})
			diff(t, "spec", *tc.want, got.Spec)
		})
	}
}

// TestParityRBAC: discovery ServiceAccount `<dgd>-k8s-service-discovery`, Role `-role`,
// RoleBinding `-binding` with the rules of DYNAMO.md "Discovery"; the planner's
// `planner-serviceaccount`, Role `planner-role`, RoleBinding `planner-binding` (Dynamo's
// namespace-restricted chart; rules: this operator's deliberate set). Labels
// app.kubernetes.io/component=rbac and name=<service account> (notes §6).
func TestParityRBAC(t *testing.T) {
	rw := strs("create", "get", "list", "watch", "update", "patch", "delete")
	cases := []struct {
		name              string
		got               render.RBAC
		sa, role, binding string
		rules             []rbacv1.PolicyRule
	}{
		{"discovery", render.DiscoveryRBAC(graph(nil, nil)),
			"llm-k8s-service-discovery", "llm-k8s-service-discovery-role", "llm-k8s-service-discovery-binding",
			[]rbacv1.PolicyRule{
				rule("", strs("endpoints", "pods"), strs("get", "list", "watch")),
				rule("discovery.k8s.io", strs("endpointslices"), strs("get", "list", "watch")),
				rule("nvidia.com", strs("dynamoworkermetadatas"), rw),
			}},
		{"planner", render.PlannerRBAC(pNS), "planner-serviceaccount", "planner-role", "planner-binding",
			[]rbacv1.PolicyRule{
				rule("nvidia.com", strs("dynamographdeployments"), strs("get", "list", "update", "patch")),
				rule("discovery.k8s.io", strs("endpointslices"), strs("get", "list", "watch")),
				rule("", strs("pods"), strs("get", "list")),
				rule("nvidia.com", strs("dynamoworkermetadatas"), rw),
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.got
			if r.ServiceAccount == nil || r.Role == nil || r.Binding == nil {
				t.Fatalf("incomplete RBAC %+v", r)
			}
			diff(t, "names", []string{tc.sa, tc.role, tc.binding}, []string{r.ServiceAccount.Name, r.Role.Name, r.Binding.Name})
			diff(t, "namespaces", []string{pNS, pNS, pNS}, []string{r.ServiceAccount.Namespace, r.Role.Namespace, r.Binding.Namespace})
			diff(t, "rules", triples(tc.rules), triples(r.Role.Rules))
			diff(t, "roleRef", rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: tc.role}, r.Binding.RoleRef)
			diff(t, "subjects", []rbacv1.Subject{{Kind: "ServiceAccount", Name: tc.sa, Namespace: pNS}}, r.Binding.Subjects)
			for _, l := range []map[string]string{r.ServiceAccount.Labels, r.Role.Labels, r.Binding.Labels} {
				diff(t, "rbac labels", []string{"rbac", tc.sa}, []string{l["app.kubernetes.io/component"], l["app.kubernetes.io/name"]})
			}
		})
	}
}

// TestParityValidate: rejections name the service (DYNAMO.md "Multinode": detected !=
// explicit framework is an error, all workers must agree; executor in {mp, ray},
// case-insensitive; an LWS main container needs command and args, notes §6
// checkMainContainer) and what Dynamo accepts passes.
func TestParityValidate(t *testing.T) {
	vllm := func(o ...opt) *spec {
		return svc("decode", img("1.6.0"), append([]opt{cmdOpt("python3", "-m", "dynamo.vllm"), argsOpt("--model", "M")}, o...)...)
	}
	sglang := svc("prefill", img("1.6.0"), cmdOpt("python3", "-m", "dynamo.sglang"), argsOpt("--model-path", "M"))
	cases := []struct {
		name      string
		ann       map[string]string
		framework string
		services  map[string]*spec
		wantErr   []string // substrings; nil: accepted
	}{
		{"valid graph", nil, "vllm", map[string]*spec{"Frontend": svc("frontend", img("1.6.0")), "VllmWorker": vllm(gpuOpt("8"), nodesOpt(2))}, nil},
		{"single-node worker without command or args", nil, "", map[string]*spec{"Worker": svc("worker", img("1.6.0"))}, nil},
		{"executor Ray (case-insensitive)", nil, "", map[string]*spec{"VllmWorker": vllm(annOpt("nvidia.com/vllm-distributed-executor-backend", "Ray"))}, nil},
		{"multinode worker without command or args", nil, "vllm",
			map[string]*spec{"Frontend": svc("frontend", img("1.6.0")), "BigWorker": svc("decode", img("1.6.0"), nodesOpt(2))}, []string{"BigWorker"}},
		{"multinode worker with args only", nil, "",
			map[string]*spec{"BigWorker": svc("decode", img("1.6.0"), argsOpt("python3 -m dynamo.vllm --model M"), nodesOpt(2))}, []string{"BigWorker"}},
		{"unknown executor on the service", nil, "",
			map[string]*spec{"VllmWorker": vllm(annOpt("nvidia.com/vllm-distributed-executor-backend", "torchrun"))}, []string{"VllmWorker"}},
		{"unknown executor on the DGD", kvs("nvidia.com/vllm-distributed-executor-backend", "torchrun"), "",
			map[string]*spec{"VllmWorker": vllm()}, []string{"nvidia.com/vllm-distributed-executor-backend"}},
		{"command names another framework than backendFramework", nil, "sglang",
			map[string]*spec{"VllmWorker": vllm()}, []string{"VllmWorker"}},
		{"workers on different frameworks", nil, "",
			map[string]*spec{"VllmDecode": vllm(), "SglangPrefill": sglang}, []string{"VllmDecode", "SglangPrefill"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dgd := graph(tc.ann, tc.services)
			dgd.Spec.BackendFramework = tc.framework
			err := render.Validate(dgd, render.Config{})
			switch {
			case tc.wantErr == nil && err != nil:
				t.Errorf("rejected: %v", err)
			case tc.wantErr != nil && err == nil:
				t.Errorf("accepted, want an error naming %q", tc.wantErr)
			case err != nil:
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %q", err, w)
					}
				}
			}
		})
	}
}

// TestParityRuntimeVersion: runtimeversion.Resolve (notes §2): the override (strict
// semver; invalid is an error) else the image tag after the last ':' following the last
// '/', digest stripped, [v]MAJ.MIN.PATCH[-pre][+build] without leading zeros, prerelease
// and build dropped; anything else unknown.
func TestParityRuntimeVersion(t *testing.T) {
	cases := []struct {
		image, override string
		want            render.Version
		ok, err         bool
	}{
		{img("0.4.0"), "", render.Version{Major: 0, Minor: 4}, true, false},
		{img("1.5.0"), "", render.Version{Major: 1, Minor: 5}, true, false},
		{img("1.6.0"), "", render.Version{Major: 1, Minor: 6}, true, false},
		{img("v1.6.2"), "", render.Version{Major: 1, Minor: 6, Patch: 2}, true, false},
		{img("1.6.0-rc1+build.7"), "", render.Version{Major: 1, Minor: 6}, true, false},
		{img("1.5.1") + "@sha256:0123456789abcdef", "", render.Version{Major: 1, Minor: 5, Patch: 1}, true, false},
		{"registry:5000/dynamo:1.6.0", "", render.Version{Major: 1, Minor: 6}, true, false},
		{img("latest"), "", render.Version{}, false, false},
		{img("1.6"), "", render.Version{}, false, false},
		{img("01.6.0"), "", render.Version{}, false, false},
		{"registry:5000/dynamo", "", render.Version{}, false, false},
		{"dynamo", "", render.Version{}, false, false},
		{img("latest"), "1.6.0", render.Version{Major: 1, Minor: 6}, true, false},
		{img("1.6.0"), "1.4.0", render.Version{Major: 1, Minor: 4}, true, false},
		{img("latest"), "1.6", render.Version{}, false, true},
		{img("latest"), "banana", render.Version{}, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.image+"|"+tc.override, func(t *testing.T) {
			v, ok, err := render.RuntimeVersion(tc.image, tc.override)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if tc.err {
				return
			}
			diff(t, "ok", tc.ok, ok)
			if tc.ok {
				diff(t, "version", tc.want, v)
			}
		})
	}
}
