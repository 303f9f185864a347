package dynamoview

import (
	"github.com/dgd-rollout/operator/render"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// WorkerType is the `worker_type` of a model card (Aggregated|Prefill|Decode|Encode), as
// read by lib/llm/src/discovery/readiness.rs. The empty value means a legacy card
// without worker_type.
type WorkerType string

// Worker types used on model cards.
const (
	WorkerAggregated WorkerType = "Aggregated"
	WorkerPrefill    WorkerType = "Prefill"
	WorkerDecode     WorkerType = "Decode"
	WorkerEncode     WorkerType = "Encode"
)

// Mode is the disaggregation mode of a worker process.
type Mode string

// Worker modes.
const (
	ModeAggregated Mode = "aggregated"
	ModePrefill    Mode = "prefill"
	ModeDecode     Mode = "decode"
)

// Runtime describes what the Dynamo runtime in one pod's main container publishes (a
// worker) or consumes (a frontend).
type Runtime struct {
	// PodName, PodNamespace and PodUID identify the pod the runtime runs in.
	PodName      string
	PodNamespace string
	PodUID       string
	// Container is the name of the container the runtime was read from.
	Container string
	// Command is the joined command line: command then args, separated by spaces.
	Command string

	// Frontend is true for `python3 -m dynamo.frontend`; a frontend registers no model.
	Frontend bool
	// Namespace is the effective Dynamo namespace. For a worker it is DYN_NAMESPACE
	// (default "dynamo") plus "-" + DYN_NAMESPACE_WORKER_SUFFIX when that is non-empty
	// (components/src/dynamo/common/utils/namespace.py, get_worker_namespace), unless an
	// explicit `--endpoint`/DYN_ENDPOINT `dyn://ns.component.endpoint` replaces it
	// (vLLM update_dynamo_config_with_engine, TRT-LLM parse_args). For a frontend it is
	// DYN_NAMESPACE as set (default "dynamo").
	Namespace string
	// BaseNamespace is DYN_NAMESPACE (default "dynamo") and WorkerSuffix is
	// DYN_NAMESPACE_WORKER_SUFFIX, both literal env values.
	BaseNamespace string
	WorkerSuffix  string
	// Prefix is the frontend's DYN_NAMESPACE_PREFIX, and Strict whether
	// DYN_NAMESPACE_PREFIX_STRICT is truthy (lib/llm/src/namespace.rs,
	// NamespacePrefixMode::from_env).
	Prefix string
	Strict bool

	// Framework is "vllm", "sglang" or "trtllm" for a worker.
	Framework string
	// Mode, WorkerType and Needs describe the worker's role. Needs is a DNF (a list of
	// AND-sets) of the worker types this one needs in its namespace.
	Mode       Mode
	WorkerType WorkerType
	Needs      [][]WorkerType
	// Component and Endpoint are where the worker serves (e.g. backend/generate).
	Component string
	Endpoint  string
	// Model is the served model name (the card's display_name).
	Model string
	// InstanceID is the runtime's instance id, InstanceID(PodName).
	InstanceID uint64
}

// IsWorker reports whether the runtime registers a model card and an endpoint.
func (r Runtime) IsWorker() bool { return !r.Frontend && r.Framework != "" }

// MainContainer returns the container the Dynamo runtime runs in: the one named "main",
// else the first (deploy/operator consts MainContainerName). It returns nil for a pod
// without containers.
func MainContainer(pod *corev1.Pod) *corev1.Container {
	if pod == nil || len(pod.Spec.Containers) == 0 {
		return nil
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "main" {
			return &pod.Spec.Containers[i]
		}
	}
	return &pod.Spec.Containers[0]
}

// RuntimeOf derives the Dynamo runtime of a pod from its main container. It returns
// false when that container runs neither a frontend nor a worker that registers: no
// `dynamo.vllm|sglang|trtllm` module, or a multinode non-leader (see nonLeaderReason).
// Variables in command and args are expected to be expanded by the caller already.
func RuntimeOf(pod *corev1.Pod) (Runtime, bool) {
	rt, reason := classify(pod)
	return rt, reason == ""
}

// classify is RuntimeOf with the reason a pod does not register ("" when it does).
func classify(pod *corev1.Pod) (Runtime, string) {
	c := MainContainer(pod)
	if c == nil {
		return Runtime{}, "pod has no containers"
	}
	env := literalEnv(c)
	cmd := strings.Join(append(append([]string{}, c.Command...), c.Args...), " ")
	rt := Runtime{
		PodName:       pod.Name,
		PodNamespace:  pod.Namespace,
		PodUID:        string(pod.UID),
		Container:     c.Name,
		Command:       cmd,
		BaseNamespace: env["DYN_NAMESPACE"],
		WorkerSuffix:  env["DYN_NAMESPACE_WORKER_SUFFIX"],
		InstanceID:    InstanceID(pod.Name),
	}
	if rt.BaseNamespace == "" {
		rt.BaseNamespace = GlobalNamespace
	}
	toks := tokens(cmd)

	if strings.Contains(cmd, "dynamo.frontend") {
		rt.Frontend = true
		rt.Namespace = rt.BaseNamespace
		rt.Prefix = env["DYN_NAMESPACE_PREFIX"]
		rt.Strict = truthy(env["DYN_NAMESPACE_PREFIX_STRICT"])
		return rt, ""
	}
	if reason := nonLeaderReason(cmd, toks); reason != "" {
		return Runtime{}, reason
	}
	for _, fw := range []string{"vllm", "sglang", "trtllm"} {
		if strings.Contains(cmd, "dynamo."+fw) {
			rt.Framework = fw
			break
		}
	}
	if rt.Framework == "" {
		return Runtime{}, "no dynamo.frontend/vllm/sglang/trtllm module in the command"
	}

	// get_worker_namespace: an empty suffix adds no dash.
	rt.Namespace = rt.BaseNamespace
	if rt.WorkerSuffix != "" {
		rt.Namespace += "-" + rt.WorkerSuffix
	}
	rt.Mode = workerMode(toks, env, rt.Framework)
	rt.Component, rt.Endpoint = "backend", "generate"
	switch rt.Mode {
	case ModePrefill:
		// vLLM/SGLang/TRT-LLM default endpoint prefill.generate (notes §5).
		rt.Component = "prefill"
		rt.WorkerType, rt.Needs = WorkerPrefill, [][]WorkerType{{WorkerDecode}}
	case ModeDecode:
		rt.WorkerType, rt.Needs = WorkerDecode, [][]WorkerType{{WorkerPrefill}}
	default:
		rt.WorkerType = WorkerAggregated
	}
	if legacyRuntime(c.Image) {
		// A runtime from before typed model cards publishes no worker_type (a legacy
		// card: readiness.rs ready iff any unit is live); a legacy prefill card is
		// recognised by its model_type (normalize_legacy_prefill_topology).
		rt.WorkerType, rt.Needs = "", nil
	}
	ep := flagValue(toks, "--endpoint")
	if ep == "" {
		ep = env["DYN_ENDPOINT"]
	}
	if ns, comp, e, ok := parseDynEndpoint(ep); ok {
		rt.Namespace, rt.Component, rt.Endpoint = ns, comp, e
	}
	rt.Model = "model"
	for _, f := range []string{"--served-model-name", "--model", "--model-path"} {
		if v := flagValue(toks, f); v != "" {
			rt.Model = v
			break
		}
	}
	return rt, ""
}

// nonLeaderReason reports why a command line is a multinode non-leader, which starts no
// Dynamo runtime of its own (dynamo-multinode.md §3-5): a vLLM `--headless` worker, a Ray
// worker (`ray start --address=... --block` without a dynamo module), a TRT-LLM sshd
// worker, or any `--node-rank` other than a literal 0 (a `$((...))` or `$(...)` rank that
// was not expanded counts as non-zero).
func nonLeaderReason(cmd string, toks []string) string {
	if strings.Contains(cmd, "--headless") {
		return "multinode non-leader: --headless"
	}
	if strings.Contains(cmd, "ray start") && strings.Contains(cmd, "--address") &&
		strings.Contains(cmd, "--block") && !strings.Contains(cmd, "dynamo.") {
		return "multinode non-leader: ray worker"
	}
	for _, t := range toks {
		if t == "sshd" || strings.HasSuffix(t, "/sshd") {
			return "multinode non-leader: sshd (TRT-LLM mpirun worker)"
		}
	}
	for i, t := range toks {
		var v string
		switch {
		case t == "--node-rank" && i+1 < len(toks):
			v = toks[i+1]
		case strings.HasPrefix(t, "--node-rank="):
			v = strings.TrimPrefix(t, "--node-rank=")
		default:
			continue
		}
		if v != "0" {
			return "multinode non-leader: --node-rank " + v
		}
	}
	return ""
}

// workerMode reads the disaggregation mode from the flags (vLLM `--is-prefill-worker`,
// `--is-decode-worker`; all backends `--disaggregation-mode`), falling back to the
// literal env DYN_VLLM_DISAGGREGATION_MODE / DYN_TRTLLM_DISAGGREGATION_MODE / the
// deprecated DYN_VLLM_IS_PREFILL_WORKER (components/src/dynamo/{vllm,trtllm}/args.py).
func workerMode(toks []string, env map[string]string, framework string) Mode {
	for _, t := range toks {
		switch t {
		case "--is-prefill-worker":
			return ModePrefill
		case "--is-decode-worker":
			return ModeDecode
		}
	}
	mode := flagValue(toks, "--disaggregation-mode")
	if mode == "" {
		switch framework {
		case "vllm":
			mode = env["DYN_VLLM_DISAGGREGATION_MODE"]
			if mode == "" && truthy(env["DYN_VLLM_IS_PREFILL_WORKER"]) {
				mode = "prefill"
			}
		case "trtllm":
			mode = env["DYN_TRTLLM_DISAGGREGATION_MODE"]
		}
	}
	switch strings.ToLower(strings.TrimSpace(mode)) {
	case "prefill":
		return ModePrefill
	case "decode":
		return ModeDecode
	}
	return ModeAggregated
}

// parseDynEndpoint splits `dyn://ns.component.endpoint`.
func parseDynEndpoint(s string) (ns, comp, ep string, ok bool) {
	rest, found := strings.CutPrefix(s, "dyn://")
	if !found {
		return "", "", "", false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// tokens splits a joined command line on white space and strips the shell quotes that
// wrap tokens (`bash -c 'trtllm-llmapi-launch python3 ...'`).
func tokens(cmd string) []string {
	f := strings.Fields(cmd)
	for i, t := range f {
		f[i] = strings.Trim(t, `'"`)
	}
	return f
}

// flagValue returns the value of `name V` or `name=V` (the first occurrence).
func flagValue(toks []string, name string) string {
	for i, t := range toks {
		if t == name && i+1 < len(toks) && !strings.HasPrefix(toks[i+1], "--") {
			return toks[i+1]
		}
		if v, ok := strings.CutPrefix(t, name+"="); ok {
			return v
		}
	}
	return ""
}

// literalEnv returns the literal env values of a container; later entries win, as in
// Kubernetes. valueFrom entries are ignored.
func literalEnv(c *corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		} else {
			delete(env, e.Name)
		}
	}
	return env
}

// truthy is Dynamo's env_is_truthy: "1", "true", "on" or "yes", case-insensitive and
// trimmed (lib/llm/src/namespace.rs, NamespacePrefixMode::from_env).
func truthy(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "on", "yes":
		return true
	}
	return false
}

// Frontends lists the frontend runtimes among pods (typically the pods of one
// Kubernetes namespace), in input order.
func Frontends(pods []corev1.Pod) []Runtime {
	var out []Runtime
	for i := range pods {
		if rt, ok := RuntimeOf(&pods[i]); ok && rt.Frontend {
			out = append(out, rt)
		}
	}
	return out
}

// legacyRuntime reports whether an image's tag is a Dynamo runtime older than 1.0.0,
// whose model cards carry no worker_type. Which release first set worker_type is not
// in the Dynamo source we read (notes: NOT FOUND); 1.0.0, the first release with
// Kubernetes discovery, is assumed. An image whose tag is no version is taken as new.
func legacyRuntime(image string) bool {
	v, ok, _ := render.RuntimeVersion(image, "")
	return ok && !v.AtLeast(render.Version{Major: 1})
}
