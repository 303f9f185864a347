package render_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dgd-rollout/operator/render"
)

// mainGolden is the expected main container of a single-node pod. env nil: not compared.
type mainGolden struct {
	command, args      []string
	ports              []corev1.ContainerPort
	live, ready, start *corev1.Probe
	env                map[string]string
}

func checkMain(t *testing.T, p corev1.PodTemplateSpec, want mainGolden) {
	t.Helper()
	m := p.Spec.Containers[0]
	if m.Name != "main" {
		t.Errorf("container 0 is %q, want main (DYNAMO.md: main container named `main`)", m.Name)
	}
	diff(t, "command", want.command, m.Command)
	diff(t, "args", want.args, m.Args)
	diff(t, "ports", want.ports, m.Ports)
	diff(t, "livenessProbe", want.live, m.LivenessProbe)
	diff(t, "readinessProbe", want.ready, m.ReadinessProbe)
	diff(t, "startupProbe", want.start, m.StartupProbe)
	if want.env != nil {
		diff(t, "env", want.env, envMap(t, m.Env))
	}
}

var (
	frontendCmd  = []string{"python3"}
	frontendArgs = []string{"-m", "dynamo.frontend"}
	shellCmd     = []string{"/bin/sh", "-c"}
	frontendPort = []corev1.ContainerPort{tcp("http", 8000)}
	workerPorts  = []corev1.ContainerPort{tcp("system", 9090), tcp("nixl", 19090)}
	plannerPorts = []corev1.ContainerPort{tcp("metrics", 9085), tcp("system", 9090)}
)

// TestParityMainContainerDefaults: each component type's defaults (command, ports,
// probes, env) with the runtime-version gates (DYNAMO.md table; notes §1-§3: startup
// probe and DYN_NAMESPACE_PREFIX_STRICT at >= 1.6.0; worker liveness failures 3 and
// DYN_HEALTH_CHECK_ENABLED=true at >= 1.5.0; unknown version: every gate off; the
// override wins over the tag; prerelease dropped).
func TestParityMainContainerDefaults(t *testing.T) {
	frontend16 := mainGolden{frontendCmd, frontendArgs, frontendPort, frontendLive, frontendReady, frontendStartup, frontendEnv(true)}
	frontendOld := mainGolden{frontendCmd, frontendArgs, frontendPort, frontendLive, frontendReady, nil, frontendEnv(false)}
	worker := func(typ string, canary bool) mainGolden {
		live := workerLive1
		if canary {
			live = workerLive3
		}
		return mainGolden{shellCmd, nil, workerPorts, live, workerReady, workerStartup, workerEnv(typ, canary)}
	}
	planner := mainGolden{shellCmd, nil, plannerPorts, workerLive1, workerReady, workerStartup, plannerEnv()}
	cases := []struct {
		name     string
		typ      string
		image    string
		override string
		want     mainGolden
	}{
		{"frontend 1.6.0", "frontend", img("1.6.0"), "", frontend16},
		{"frontend 1.5.0", "frontend", img("1.5.0"), "", frontendOld},
		{"frontend 0.4.0", "frontend", img("0.4.0"), "", frontendOld},
		{"frontend non-semver tag", "frontend", img("latest"), "", frontendOld},
		{"frontend override 1.6.0 over non-semver tag", "frontend", img("latest"), "1.6.0", frontend16},
		{"frontend override 1.4.0 wins over tag 1.6.0", "frontend", img("1.6.0"), "1.4.0", frontendOld},
		{"frontend prerelease 1.6.0-rc1 is 1.6.0", "frontend", img("1.6.0-rc1"), "", frontend16},
		{"frontend v-prefixed tag", "frontend", img("v1.6.0"), "", frontend16},
		{"decode 1.6.0", "decode", img("1.6.0"), "", worker("decode", true)},
		{"decode 1.5.0", "decode", img("1.5.0"), "", worker("decode", true)},
		{"prefill 0.4.0", "prefill", img("0.4.0"), "", worker("prefill", false)},
		{"worker 1.4.9", "worker", img("1.4.9"), "", worker("worker", false)},
		{"worker non-semver tag", "worker", img("latest"), "", worker("worker", false)},
		{"worker digest-pinned non-semver", "worker", img("main") + "@sha256:0123456789abcdef", "", worker("worker", false)},
		{"worker override 1.5.0", "worker", img("latest"), "1.5.0", worker("worker", true)},
		{"planner 1.6.0 (no gates)", "planner", img("1.6.0"), "", planner},
		{"planner 0.4.0", "planner", img("0.4.0"), "", planner},
		// DYNAMO.md: "Other component types get the common container only."
		{"other type: common container only", "router", img("1.6.0"), "", mainGolden{shellCmd, nil, nil, nil, nil, nil, commonEnv("router")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hash := ""
			if tc.typ == "worker" || tc.typ == "prefill" || tc.typ == "decode" {
				hash = pHash
			}
			s := svc(tc.typ, tc.image, overrideOpt(tc.override))
			checkMain(t, renderOne(t, nil, "Comp", s, hash, render.Config{}, render.RoleMain, nil), tc.want)
		})
	}
}

// TestParityMainContainerUserFields: the user's mainContainer is merged over the
// defaults; each non-empty field wins, command and args independently (user args alone
// keep the default command; user command alone keeps the default args), user ports
// replace the defaults, a user probe replaces the default whole, and the service's
// top-level liveness/readiness probes are applied last (notes §1, mergo WithOverride;
// ALPHA GenerateBasePodSpec).
func TestParityMainContainerUserFields(t *testing.T) {
	execProbe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 7}
	tcpProbe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8000)}}}
	svcProbe := probe("/ready", "http", 1, 2, 3, 4)
	vllmLine := "python3 -m dynamo.vllm --model Qwen/Qwen3-0.6B"
	cases := []struct {
		name string
		s    *spec
		want mainGolden
	}{
		{"frontend: user args alone keep python3",
			svc("frontend", img("1.6.0"), argsOpt("-m", "dynamo.frontend", "--router-mode", "kv")),
			mainGolden{frontendCmd, []string{"-m", "dynamo.frontend", "--router-mode", "kv"}, frontendPort, frontendLive, frontendReady, frontendStartup, nil}},
		{"frontend: user command alone keeps the default args",
			svc("frontend", img("1.6.0"), cmdOpt("python3.12")),
			mainGolden{[]string{"python3.12"}, frontendArgs, frontendPort, frontendLive, frontendReady, frontendStartup, nil}},
		{"worker: user args alone keep /bin/sh -c",
			svc("decode", img("1.6.0"), argsOpt(vllmLine)),
			mainGolden{shellCmd, []string{vllmLine}, workerPorts, workerLive3, workerReady, workerStartup, nil}},
		{"worker: user command and args",
			svc("worker", img("1.6.0"), cmdOpt("python3", "-m", "dynamo.vllm"), argsOpt("--model", "M")),
			mainGolden{[]string{"python3", "-m", "dynamo.vllm"}, []string{"--model", "M"}, workerPorts, workerLive3, workerReady, workerStartup, nil}},
		{"worker: user ports replace the defaults",
			svc("worker", img("1.6.0"), func(s *spec) { mainOf(s).Ports = []corev1.ContainerPort{tcp("custom", 8080)} }),
			mainGolden{shellCmd, nil, []corev1.ContainerPort{tcp("custom", 8080)}, workerLive3, workerReady, workerStartup, nil}},
		{"worker: mainContainer probes replace each default whole",
			svc("worker", img("1.6.0"), func(s *spec) {
				mainOf(s).LivenessProbe, mainOf(s).StartupProbe = execProbe, tcpProbe
			}),
			mainGolden{shellCmd, nil, workerPorts, execProbe, workerReady, tcpProbe, nil}},
		{"frontend: service-level probes win over mainContainer probes",
			svc("frontend", img("1.6.0"), func(s *spec) {
				mainOf(s).ReadinessProbe = execProbe
				s.ReadinessProbe, s.LivenessProbe = svcProbe, tcpProbe
			}),
			mainGolden{frontendCmd, frontendArgs, frontendPort, tcpProbe, svcProbe, frontendStartup, nil}},
		{"other type: user command and args, still no ports or probes",
			svc("router", img("1.6.0"), cmdOpt("/router"), argsOpt("--port", "9002")),
			mainGolden{[]string{"/router"}, []string{"--port", "9002"}, nil, nil, nil, nil, nil}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hash := ""
			if tc.s.IsWorker() {
				hash = pHash
			}
			checkMain(t, renderOne(t, nil, "Comp", tc.s, hash, render.Config{}, render.RoleMain, nil), tc.want)
		})
	}
}

// TestParitySidecars: other user containers stay as sidecars after main, unchanged
// (DYNAMO.md "Every component"); the user's mainContainer name is forced to main.
func TestParitySidecars(t *testing.T) {
	proxy := corev1.Container{Name: "proxy", Image: "envoy:1", Args: []string{"--config", "/etc/envoy.yaml"}}
	s := svc("frontend", img("1.6.0"), func(s *spec) {
		mainOf(s).Name = "engine"
		podOf(s).Containers = []corev1.Container{proxy}
	})
	p := renderOne(t, nil, "Frontend", s, "", render.Config{}, render.RoleMain, nil)
	var names []string
	for _, c := range p.Spec.Containers {
		names = append(names, c.Name)
	}
	diff(t, "container names", []string{"main", "proxy"}, names)
	if len(p.Spec.Containers) == 2 {
		diff(t, "sidecar", proxy, p.Spec.Containers[1])
	}
}

// TestParityEnv: env values and precedence, lowest → highest: platform endpoints
// (only those configured), component defaults, DGD spec.envs, mainContainer env, the
// service's envs (notes §2 "Precedence"); DYN_DISCOVERY_BACKEND absent under etcd
// discovery (notes §2 item 8); the forced Dynamo namespace variables (render/config.go);
// envFromSecret → envFrom (notes §2).
func TestParityEnv(t *testing.T) {
	platform := render.Config{NATSServer: "nats://nats:4222", ETCDEndpoints: "http://etcd:2379",
		ModelExpressURL: "http://mx:8001", PrometheusEndpoint: "http://prom:9090"}
	platformEnv := []string{"NATS_SERVER", "nats://nats:4222", "ETCD_ENDPOINTS", "http://etcd:2379",
		"MODEL_EXPRESS_URL", "http://mx:8001", "PROMETHEUS_ENDPOINT", "http://prom:9090"}
	etcd := map[string]string{"nvidia.com/dynamo-discovery-backend": "etcd"}
	cases := []struct {
		name    string
		ann     map[string]string
		dgdEnvs []corev1.EnvVar
		s       *spec
		hash    string
		cfg     render.Config
		want    map[string]string
	}{
		{"platform endpoints only when configured (frontend)", nil, nil, svc("frontend", img("1.6.0")), "", platform,
			set(frontendEnv(true), platformEnv...)},
		{"platform endpoints only when configured (planner)", nil, nil, svc("planner", img("1.6.0")), "", platform,
			set(plannerEnv(), platformEnv...)},
		{"platform endpoints only when configured (other)", nil, nil, svc("router", img("1.6.0")), "", platform,
			set(commonEnv("router"), platformEnv...)},
		{"user env wins over a platform endpoint", nil, nil,
			svc("decode", img("1.6.0"), envsOpt(ev("NATS_SERVER", "nats://mine:4222"))), pHash, platform,
			set(workerEnv("decode", true), append(platformEnv, "NATS_SERVER", "nats://mine:4222")...)},
		{"etcd annotation: no DYN_DISCOVERY_BACKEND (worker)", etcd, nil, svc("decode", img("1.6.0")), pHash, render.Config{},
			set(workerEnv("decode", true), "DYN_DISCOVERY_BACKEND", "<none>")},
		{"etcd annotation: no DYN_DISCOVERY_BACKEND (frontend)", etcd, nil, svc("frontend", img("1.6.0")), "", render.Config{},
			set(frontendEnv(true), "DYN_DISCOVERY_BACKEND", "<none>")},
		{"etcd operator default: no DYN_DISCOVERY_BACKEND", nil, nil, svc("planner", img("1.6.0")), "", render.Config{DiscoveryBackend: "etcd"},
			set(plannerEnv(), "DYN_DISCOVERY_BACKEND", "<none>")},
		{"kubernetes annotation over an etcd operator default", map[string]string{"nvidia.com/dynamo-discovery-backend": "kubernetes"}, nil,
			svc("planner", img("1.6.0")), "", render.Config{DiscoveryBackend: "etcd"}, plannerEnv()},
		{"precedence: DGD envs < mainContainer env < service envs; user beats defaults", nil,
			[]corev1.EnvVar{ev("A", "dgd"), ev("B", "dgd"), ev("C", "dgd"), ev("DYN_SYSTEM_PORT", "dgd")},
			svc("decode", img("1.6.0"),
				mainEnvOpt(ev("B", "main"), ev("C", "main"), ev("DYN_HEALTH_CHECK_ENABLED", "false")),
				envsOpt(ev("C", "svc"), ev("D", "svc"), ev("NIXL_TELEMETRY_ENABLE", "y"))),
			pHash, render.Config{},
			set(workerEnv("decode", true), "A", "dgd", "B", "main", "C", "svc", "D", "svc", "DYN_SYSTEM_PORT", "dgd",
				"DYN_HEALTH_CHECK_ENABLED", "false", "NIXL_TELEMETRY_ENABLE", "y")},
		{"user valueFrom kept", nil, nil,
			svc("frontend", img("1.6.0"), envsOpt(corev1.EnvVar{Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "hf"}, Key: "token"}}})),
			"", render.Config{}, set(frontendEnv(true), "HF_TOKEN", "secret:hf/token")},
		// Deliberate difference (render/config.go): the Dynamo namespace variables are forced.
		{"forced: DYN_NAMESPACE and DYN_NAMESPACE_WORKER_SUFFIX", nil, []corev1.EnvVar{ev("DYN_NAMESPACE", "dgd-ns")},
			svc("decode", img("1.6.0"), envsOpt(ev("DYN_NAMESPACE", "mine"), ev("DYN_NAMESPACE_WORKER_SUFFIX", "ffffffff"))),
			pHash, render.Config{}, workerEnv("decode", true)},
		{"forced: DYN_NAMESPACE_PREFIX", nil, nil,
			svc("frontend", img("1.6.0"), envsOpt(ev("DYN_NAMESPACE_PREFIX", "other"))), "", render.Config{}, frontendEnv(true)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dgd := graph(tc.ann, map[string]*spec{"Comp": tc.s})
			dgd.Spec.Envs = tc.dgdEnvs
			p, err := render.Component{DGD: dgd, Name: "Comp", Spec: tc.s, Hash: tc.hash, Config: tc.cfg}.Pod(render.RoleMain, nil)
			if err != nil {
				t.Fatal(err)
			}
			diff(t, "env", tc.want, envMap(t, p.Spec.Containers[0].Env))
		})
	}
}

// TestParityEnvDottedName: DYN_NAMESPACE = <k8s-ns>-<dgd> with the DGD name's dots
// turned into dashes; DYN_PARENT_DGD_K8S_NAME keeps the name (ComputeDynamoNamespace).
func TestParityEnvDottedName(t *testing.T) {
	s := svc("frontend", img("1.6.0"))
	dgd := graph(nil, map[string]*spec{"Frontend": s})
	dgd.Name, dgd.Namespace = "qwen.v2", "team-a"
	p, err := render.Component{DGD: dgd, Name: "Frontend", Spec: s}.Pod(render.RoleMain, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := envMap(t, p.Spec.Containers[0].Env)
	want := map[string]string{"DYN_NAMESPACE": "team-a-qwen-v2", "DYN_NAMESPACE_PREFIX": "team-a-qwen-v2",
		"DYN_PARENT_DGD_K8S_NAME": "qwen.v2", "DYN_PARENT_DGD_K8S_NAMESPACE": "team-a"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("env %s = %q, want %q", k, got[k], v)
		}
	}
}

// TestParityEnvFromSecret: envFromSecret → envFrom [{secretRef: {name}}] on main (notes §2).
func TestParityEnvFromSecret(t *testing.T) {
	name := "hf-token"
	s := svc("decode", img("1.6.0"), func(s *spec) { s.EnvFromSecret = &name })
	p := renderOne(t, nil, "Decode", s, pHash, render.Config{}, render.RoleMain, nil)
	diff(t, "envFrom", []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}, p.Spec.Containers[0].EnvFrom)
}
