package render_test

// Shared builders and hand-written expectations for the parity golden tests
// (parity_*_test.go). Every expected value in these files is written from
// ../shared/design/DYNAMO.md and the source notes notes/dynamo-render.md and
// notes/dynamo-multinode.md (Dynamo's deploy/operator/internal/dynamo), never from this
// package's output. Env is compared as a name → value map: this operator keeps env in
// order of first appearance where Dynamo sorts it (render/config.go).

import (
	"maps"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/render"
)

type spec = v1alpha1.DynamoComponentDeploymentSharedSpec

const (
	pNS    = "prod"
	pDGD   = "llm"
	pDynNS = "prod-llm" // DYN_NAMESPACE = <k8s-ns>-<dgd>
	pHash  = "abcd1234" // Dynamo's worker hash shape: 8 lowercase hex characters
)

func img(tag string) string { return "nvcr.io/nvidia/ai-dynamo/vllm-runtime:" + tag }

// opt edits a service spec.
type opt func(*spec)

// svc is a service of componentType typ whose mainContainer has only an image.
func svc(typ, image string, opts ...opt) *spec {
	s := &spec{ComponentType: typ, ExtraPodSpec: &v1alpha1.ExtraPodSpec{MainContainer: &corev1.Container{Image: image}}}
	for _, o := range opts {
		o(s)
	}
	return s
}

func mainOf(s *spec) *corev1.Container { return s.ExtraPodSpec.MainContainer }
func podOf(s *spec) *corev1.PodSpec {
	if s.ExtraPodSpec.PodSpec == nil {
		s.ExtraPodSpec.PodSpec = &corev1.PodSpec{}
	}
	return s.ExtraPodSpec.PodSpec
}

func cmdOpt(c ...string) opt   { return func(s *spec) { mainOf(s).Command = c } }
func argsOpt(a ...string) opt  { return func(s *spec) { mainOf(s).Args = a } }
func overrideOpt(v string) opt { return func(s *spec) { s.RuntimeVersionOverride = v } }
func nodesOpt(n int32) opt {
	return func(s *spec) { s.Multinode = &v1alpha1.MultinodeSpec{NodeCount: n} }
}
func subTypeOpt(v string) opt           { return func(s *spec) { s.SubComponentType = v } }
func mainEnvOpt(e ...corev1.EnvVar) opt { return func(s *spec) { mainOf(s).Env = e } }
func envsOpt(e ...corev1.EnvVar) opt    { return func(s *spec) { s.Envs = e } }
func annOpt(kv ...string) opt           { return func(s *spec) { s.Annotations = kvs(kv...) } }
func labelsOpt(kv ...string) opt        { return func(s *spec) { s.Labels = kvs(kv...) } }

// gpuOpt asks for n GPUs in requests and limits.
func gpuOpt(n string) opt {
	return func(s *spec) {
		s.Resources = &v1alpha1.Resources{Requests: &v1alpha1.ResourceItem{GPU: n}, Limits: &v1alpha1.ResourceItem{GPU: n}}
	}
}

func kvs(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func ev(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

// graph is DGD llm in namespace prod with the given annotations and services.
func graph(ann map[string]string, services map[string]*spec) *v1alpha1.DynamoGraphDeployment {
	return &v1alpha1.DynamoGraphDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: pDGD, Namespace: pNS, Annotations: ann},
		Spec:       v1alpha1.DynamoGraphDeploymentSpec{Services: services},
	}
}

// renderOne renders service name of a one-service DGD.
func renderOne(t *testing.T, ann map[string]string, name string, s *spec, hash string, cfg render.Config, role render.Role, gang render.Gang) corev1.PodTemplateSpec {
	t.Helper()
	dgd := graph(ann, map[string]*spec{name: s})
	c := render.Component{DGD: dgd, Name: name, Spec: s, Hash: hash, Config: cfg}
	p, err := c.Pod(role, gang)
	if err != nil {
		t.Fatalf("Pod(%s): %v", role, err)
	}
	if len(p.Spec.Containers) == 0 {
		t.Fatalf("Pod(%s): no containers", role)
	}
	return p
}

// envMap is env as name → value, a valueFrom written `field:<path>` or
// `secret:<name>/<key>`; a name appearing twice is an error.
func envMap(t *testing.T, env []corev1.EnvVar) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, e := range env {
		if _, dup := m[e.Name]; dup {
			t.Errorf("env %s appears twice", e.Name)
		}
		switch {
		case e.ValueFrom == nil:
			m[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			m[e.Name] = "field:" + e.ValueFrom.FieldRef.FieldPath
		case e.ValueFrom.SecretKeyRef != nil:
			m[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		default:
			m[e.Name] = "?"
		}
	}
	return m
}

// set returns a copy of base with kv set; a value "<none>" removes the name.
func set(base map[string]string, kv ...string) map[string]string {
	m := maps.Clone(base)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "<none>" {
			delete(m, kv[i])
		} else {
			m[kv[i]] = kv[i+1]
		}
	}
	return m
}

// commonEnv is every component's env (DYNAMO.md "Every component") under Kubernetes
// discovery, without platform endpoints.
func commonEnv(typ string) map[string]string {
	return map[string]string{
		"DYN_NAMESPACE": pDynNS, "DYN_COMPONENT": typ,
		"DYN_PARENT_DGD_K8S_NAME": pDGD, "DYN_PARENT_DGD_K8S_NAMESPACE": pNS,
		"POD_NAME": "field:metadata.name", "POD_NAMESPACE": "field:metadata.namespace", "POD_UID": "field:metadata.uid",
		"DYN_DISCOVERY_BACKEND": "kubernetes",
	}
}

// frontendEnv: DYNAMO.md table, env row, Frontend column.
func frontendEnv(strict bool) map[string]string {
	m := set(commonEnv("frontend"), "DYNAMO_PORT", "8000", "DYN_HTTP_PORT", "8000", "DYN_NAMESPACE_PREFIX", pDynNS)
	if strict {
		m["DYN_NAMESPACE_PREFIX_STRICT"] = "true"
	}
	return m
}

// workerEnv: DYNAMO.md table, env row, Worker column (notes §2 for the NIXL values).
func workerEnv(typ string, canary bool) map[string]string {
	health := "false"
	if canary {
		health = "true"
	}
	return set(commonEnv(typ),
		"DYN_SYSTEM_ENABLED", "true", "DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS", `["generate"]`, "DYN_SYSTEM_PORT", "9090",
		"DYN_HEALTH_CHECK_ENABLED", health, "NIXL_TELEMETRY_ENABLE", "n", "NIXL_TELEMETRY_EXPORTER", "prometheus",
		"NIXL_TELEMETRY_PROMETHEUS_PORT", "19090", "DYN_FORWARDPASS_METRIC_PORT", "20380", "DYN_NAMESPACE_WORKER_SUFFIX", pHash)
}

func plannerEnv() map[string]string {
	return set(commonEnv("planner"), "PLANNER_PROMETHEUS_PORT", "9085", "DYN_SYSTEM_PORT", "9090")
}

func tcp(name string, port int32) corev1.ContainerPort {
	return corev1.ContainerPort{Name: name, ContainerPort: port, Protocol: corev1.ProtocolTCP}
}

// probe is an HTTP GET probe; fields not given stay unset (notes §3: no successThreshold).
func probe(path, port string, delay, period, timeout, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString(port)}},
		InitialDelaySeconds: delay, PeriodSeconds: period, TimeoutSeconds: timeout, FailureThreshold: failures,
	}
}

// Default probes, DYNAMO.md table.
var (
	frontendLive    = probe("/live", "http", 15, 10, 1, 3)
	frontendReady   = probe("/health", "http", 10, 10, 3, 3)
	frontendStartup = probe("/live", "http", 0, 10, 1, 30)
	workerLive1     = probe("/live", "system", 0, 5, 4, 1)
	workerLive3     = probe("/live", "system", 0, 5, 4, 3)
	workerReady     = probe("/health", "system", 0, 10, 4, 3)
	workerStartup   = probe("/live", "system", 0, 10, 5, 720)
)

// diff reports a mismatch of got against want.
func diff(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s: -want +got\n%s", what, d)
	}
}

// triples flattens RBAC rules to sorted "group|resource|verb" strings, so rules split or
// joined differently compare equal.
func triples(rules []rbacv1.PolicyRule) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					k := g + "|" + res + "|" + v
					if !seen[k] {
						seen[k] = true
						out = append(out, k)
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func rule(group string, resources, verbs []string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
}

func strs(s ...string) []string { return s }
