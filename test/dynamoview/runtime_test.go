package dynamoview

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

const leaderHost = "$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-vllmworker-ldr-0.$(GROVE_HEADLESS_SERVICE)"

// mpirunLeader is the TRT-LLM multinode leader script (backend_trtllm.go setupLeaderContainer).
const mpirunLeader = `mkdir -p $HOME/.ssh && ls -la /ssh-pk/ && cp /ssh-pk/private.key $HOME/.ssh/id_rsa && ` +
	`chmod 600 $HOME/.ssh/id_rsa $HOME/.ssh/authorized_keys && ` +
	`printf 'Host *\nIdentityFile '$HOME'/.ssh/id_rsa\nStrictHostKeyChecking no\nPort 2222\n' > $HOME/.ssh/config && ` +
	`mpirun $([ "$(id -u)" = "0" ] && echo --allow-run-as-root) --oversubscribe -n 16 -H ldr-0.svc,wkr-0.svc ` +
	`--mca pml ob1 --mca plm_rsh_args "-p 2222 -o StrictHostKeyChecking=no -i $HOME/.ssh/id_rsa" -x DYN_NAMESPACE -x POD_NAME ` +
	`bash -c 'trtllm-llmapi-launch python3 -m dynamo.trtllm --model-path nvidia/Llama-3.1-8B --disaggregation-mode prefill'`

// sshdWorker is the TRT-LLM multinode worker script (backend_trtllm.go setupWorkerContainer).
const sshdWorker = `mkdir -p $HOME/.ssh $HOME/.ssh/host_keys $HOME/.ssh/run && ` +
	`ssh-keygen -t rsa -f $HOME/.ssh/host_keys/ssh_host_rsa_key -N '' && ` +
	`printf 'Port 2222\nPidFile '$HOME'/.ssh/run/sshd.pid\n' > $HOME/.ssh/sshd_config && ` +
	`/usr/sbin/sshd -D -f $HOME/.ssh/sshd_config`

func TestRuntimeOf(t *testing.T) {
	py := []string{"python3"}
	sh := []string{"sh", "-c"}
	binsh := []string{"/bin/sh", "-c"}
	base := []string{"DYN_NAMESPACE", "myns-dgd", "DYN_NAMESPACE_WORKER_SUFFIX", "deadbeef"}
	cases := []struct {
		name       string
		command    []string
		args       []string
		env        []string
		wantOK     bool
		wantReason string // substring of classify's reason when !wantOK
		want       Runtime
	}{
		{
			name: "frontend", command: py, args: []string{"-m", "dynamo.frontend"},
			env:    []string{"DYN_NAMESPACE", "myns-dgd", "DYN_NAMESPACE_PREFIX", "myns-dgd", "DYN_NAMESPACE_PREFIX_STRICT", " TRUE "},
			wantOK: true,
			want:   Runtime{Frontend: true, Namespace: "myns-dgd", BaseNamespace: "myns-dgd", Prefix: "myns-dgd", Strict: true},
		},
		{
			name: "frontend strict not truthy", command: py, args: []string{"-m", "dynamo.frontend"},
			env:    []string{"DYN_NAMESPACE_PREFIX", "p", "DYN_NAMESPACE_PREFIX_STRICT", "false"},
			wantOK: true,
			want:   Runtime{Frontend: true, Namespace: "dynamo", BaseNamespace: "dynamo", Prefix: "p"},
		},
		{
			name: "vllm prefill", command: py, args: strings.Fields("-m dynamo.vllm --model Qwen/Qwen3-0.6B --is-prefill-worker"),
			env: base, wantOK: true,
			want: Runtime{Namespace: "myns-dgd-deadbeef", BaseNamespace: "myns-dgd", WorkerSuffix: "deadbeef", Framework: "vllm",
				Mode: ModePrefill, WorkerType: WorkerPrefill, Needs: [][]WorkerType{{WorkerDecode}},
				Component: "prefill", Endpoint: "generate", Model: "Qwen/Qwen3-0.6B"},
		},
		{
			name: "vllm prefill as one command", command: strings.Fields("python3 -m dynamo.vllm --model Qwen/Qwen3-0.6B --is-prefill-worker"),
			env: base, wantOK: true,
			want: Runtime{Namespace: "myns-dgd-deadbeef", BaseNamespace: "myns-dgd", WorkerSuffix: "deadbeef", Framework: "vllm",
				Mode: ModePrefill, WorkerType: WorkerPrefill, Needs: [][]WorkerType{{WorkerDecode}},
				Component: "prefill", Endpoint: "generate", Model: "Qwen/Qwen3-0.6B"},
		},
		{
			name: "vllm decode via --disaggregation-mode", command: py, args: strings.Fields("-m dynamo.vllm --model M --disaggregation-mode decode"),
			env: base, wantOK: true,
			want: Runtime{Namespace: "myns-dgd-deadbeef", BaseNamespace: "myns-dgd", WorkerSuffix: "deadbeef", Framework: "vllm",
				Mode: ModeDecode, WorkerType: WorkerDecode, Needs: [][]WorkerType{{WorkerPrefill}},
				Component: "backend", Endpoint: "generate", Model: "M"},
		},
		{
			name: "sglang prefill via --disaggregation-mode=prefill, no suffix, no DYN_NAMESPACE", command: py,
			args: strings.Fields("-m dynamo.sglang --model-path M --disaggregation-mode=prefill"), wantOK: true,
			want: Runtime{Namespace: "dynamo", BaseNamespace: "dynamo", Framework: "sglang",
				Mode: ModePrefill, WorkerType: WorkerPrefill, Needs: [][]WorkerType{{WorkerDecode}},
				Component: "prefill", Endpoint: "generate", Model: "M"},
		},
		{
			name: "aggregated, served name wins, empty suffix adds no dash", command: py,
			args:   strings.Fields("-m dynamo.vllm --model M --served-model-name served"),
			env:    []string{"DYN_NAMESPACE", "ns", "DYN_NAMESPACE_WORKER_SUFFIX", ""},
			wantOK: true,
			want: Runtime{Namespace: "ns", BaseNamespace: "ns", Framework: "vllm", Mode: ModeAggregated,
				WorkerType: WorkerAggregated, Component: "backend", Endpoint: "generate", Model: "served"},
		},
		{
			name: "default model name and decode from env", command: py, args: strings.Fields("-m dynamo.vllm"),
			env:    []string{"DYN_NAMESPACE", "ns", "DYN_VLLM_DISAGGREGATION_MODE", "decode"},
			wantOK: true,
			want: Runtime{Namespace: "ns", BaseNamespace: "ns", Framework: "vllm", Mode: ModeDecode, WorkerType: WorkerDecode,
				Needs: [][]WorkerType{{WorkerPrefill}}, Component: "backend", Endpoint: "generate", Model: "model"},
		},
		{
			name: "explicit --endpoint replaces namespace", command: py,
			args: strings.Fields("-m dynamo.vllm --model M --endpoint dyn://other.backend.generate"), env: base, wantOK: true,
			want: Runtime{Namespace: "other", BaseNamespace: "myns-dgd", WorkerSuffix: "deadbeef", Framework: "vllm",
				Mode: ModeAggregated, WorkerType: WorkerAggregated, Component: "backend", Endpoint: "generate", Model: "M"},
		},
		{
			name: "vllm mp multinode leader registers", command: py,
			args: strings.Fields("-m dynamo.vllm --model M --distributed-executor-backend mp --nnodes 2 --master-addr " + leaderHost + " --node-rank 0"),
			env:  base, wantOK: true,
			want: Runtime{Namespace: "myns-dgd-deadbeef", BaseNamespace: "myns-dgd", WorkerSuffix: "deadbeef", Framework: "vllm",
				Mode: ModeAggregated, WorkerType: WorkerAggregated, Component: "backend", Endpoint: "generate", Model: "M"},
		},
		{
			name: "vllm mp Grove worker: sh -c exec ... --node-rank $((...)) --headless", command: sh,
			args: []string{"exec python3 -m dynamo.vllm --model M --distributed-executor-backend mp --nnodes 2 --master-addr " +
				leaderHost + " --master-port 29500 --node-rank $((GROVE_PCLQ_POD_INDEX + 1)) --headless"},
			env: base, wantReason: "--headless",
		},
		{
			name: "sglang Grove worker: rank $((...)) is not 0", command: sh,
			args: []string{"exec python3 -m dynamo.sglang --model-path M --tp 16 --dist-init-addr L:29500 --nnodes 2 --node-rank $((GROVE_PCLQ_POD_INDEX + 1))"},
			env:  base, wantReason: "--node-rank $((GROVE_PCLQ_POD_INDEX",
		},
		{
			name: "sglang LWS worker: unexpanded $(LWS_WORKER_INDEX)", command: py,
			args: strings.Fields("-m dynamo.sglang --model-path M --node-rank $(LWS_WORKER_INDEX)"), env: base, wantReason: "--node-rank $(LWS_WORKER_INDEX)",
		},
		{
			name: "--node-rank=1", command: py, args: strings.Fields("-m dynamo.sglang --model-path M --node-rank=1"), env: base, wantReason: "--node-rank 1",
		},
		{
			name: "sglang leader rank 0", command: py, args: strings.Fields("-m dynamo.sglang --model-path M --nnodes 2 --node-rank 0"),
			env: base, wantOK: true,
			want: Runtime{Namespace: "myns-dgd-deadbeef", BaseNamespace: "myns-dgd", WorkerSuffix: "deadbeef", Framework: "sglang",
				Mode: ModeAggregated, WorkerType: WorkerAggregated, Component: "backend", Endpoint: "generate", Model: "M"},
		},
		{
			name: "ray worker", command: binsh, args: []string{"ray start --address=" + leaderHost + ":6379 --block"},
			env: base, wantReason: "ray worker",
		},
		{
			name: "ray leader registers", command: binsh,
			args: []string{"ray start --head --port=6379 && python3 -m dynamo.vllm --model M --tensor-parallel-size 16 --distributed-executor-backend ray"},
			env:  base, wantOK: true,
			want: Runtime{Namespace: "myns-dgd-deadbeef", BaseNamespace: "myns-dgd", WorkerSuffix: "deadbeef", Framework: "vllm",
				Mode: ModeAggregated, WorkerType: WorkerAggregated, Component: "backend", Endpoint: "generate", Model: "M"},
		},
		{
			name: "TRT-LLM sshd worker", command: binsh, args: []string{sshdWorker}, env: base, wantReason: "sshd",
		},
		{
			name: "TRT-LLM mpirun leader registers", command: binsh, args: []string{mpirunLeader}, env: base, wantOK: true,
			want: Runtime{Namespace: "myns-dgd-deadbeef", BaseNamespace: "myns-dgd", WorkerSuffix: "deadbeef", Framework: "trtllm",
				Mode: ModePrefill, WorkerType: WorkerPrefill, Needs: [][]WorkerType{{WorkerDecode}},
				Component: "prefill", Endpoint: "generate", Model: "nvidia/Llama-3.1-8B"},
		},
		{
			name: "planner is not a runtime that registers", command: py, args: strings.Fields("-m dynamo.planner"), env: base,
			wantReason: "no dynamo",
		},
		{
			name: "default worker command without args", command: binsh, env: base, wantReason: "no dynamo",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := podWith("p-0", tc.command, tc.args, tc.env...)
			got, ok := RuntimeOf(&pod)
			if ok != tc.wantOK {
				_, reason := classify(&pod)
				t.Fatalf("RuntimeOf ok = %v, want %v (reason %q)", ok, tc.wantOK, reason)
			}
			if !ok {
				if _, reason := classify(&pod); !strings.Contains(reason, tc.wantReason) {
					t.Errorf("reason %q does not contain %q", reason, tc.wantReason)
				}
				return
			}
			want := tc.want
			want.PodName, want.PodNamespace, want.PodUID, want.Container = "p-0", testNs, "uid-p-0", "main"
			want.Command = strings.Join(append(append([]string{}, tc.command...), tc.args...), " ")
			want.InstanceID = InstanceID("p-0")
			if !reflect.DeepEqual(got, want) {
				t.Errorf("RuntimeOf:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestRuntimeOfMainContainerAndEnv(t *testing.T) {
	pod := podWith("p-0", []string{"python3"}, []string{"-m", "dynamo.vllm", "--model", "M"})
	sidecar := corev1.Container{Name: "sidecar-frontend", Command: []string{"python3", "-m", "dynamo.frontend"}}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: "DYN_NAMESPACE", Value: "first"},
		{Name: "DYN_NAMESPACE", Value: "ns"},
		{Name: "DYN_NAMESPACE_WORKER_SUFFIX", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['x']"}}},
	}
	pod.Spec.Containers = append([]corev1.Container{sidecar}, pod.Spec.Containers...)
	rt, ok := RuntimeOf(&pod)
	if !ok || rt.Frontend || rt.Container != "main" {
		t.Fatalf("want the main worker container, got ok=%v %+v", ok, rt)
	}
	if rt.Namespace != "ns" {
		t.Errorf("Namespace = %q, want ns (last literal wins, valueFrom ignored)", rt.Namespace)
	}

	// Without a container named main, the first container is read.
	pod.Spec.Containers[1].Name = "engine"
	rt, ok = RuntimeOf(&pod)
	if !ok || !rt.Frontend || rt.Container != "sidecar-frontend" {
		t.Errorf("want the first container (frontend), got ok=%v %+v", ok, rt)
	}

	if _, ok := RuntimeOf(&corev1.Pod{}); ok {
		t.Errorf("a pod without containers has no runtime")
	}
}

func TestFrontends(t *testing.T) {
	pods := []corev1.Pod{
		decodeWorker("d-0", "myns-dgd", "deadbeef"),
		frontendPod("fe-0", "myns-dgd", true),
		podWith("planner-0", []string{"python3"}, []string{"-m", "dynamo.planner"}),
		frontendPod("fe-1", "myns-dgd", false),
	}
	got := Frontends(pods)
	if len(got) != 2 || got[0].PodName != "fe-0" || got[1].PodName != "fe-1" {
		t.Fatalf("Frontends = %+v", got)
	}
	if !got[0].Strict || got[1].Strict || got[0].Prefix != "myns-dgd" {
		t.Errorf("frontend settings wrong: %+v", got)
	}
}
