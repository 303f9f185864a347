package gangs

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestExpandString follows the cases of k8s.io/kubernetes
// third_party/forked/golang/expansion/expand_test.go.
func TestExpandString(t *testing.T) {
	vars := map[string]string{"VAR_A": "A", "VAR_B": "B", "VAR_EMPTY": "", "W": "1"}
	cases := map[string]string{
		"$(VAR_A)":                      "A",
		"___$(VAR_B)___":                "___B___",
		"$(VAR_A)-$(VAR_B)":             "A-B",
		"$(VAR_EMPTY)x":                 "x",
		"$(UNDEFINED)":                  "$(UNDEFINED)",
		"$$(VAR_A)":                     "$(VAR_A)",
		"$$$$(VAR_A)":                   "$$(VAR_A)",
		"$$$(VAR_A)":                    "$A",
		"$(VAR_A":                       "$(VAR_A",
		"$VAR_A":                        "$VAR_A",
		"${VAR_A}":                      "${VAR_A}",
		"a$":                            "a$",
		"$()":                           "$()",
		"$((GROVE_PCLQ_POD_INDEX + 1))": "$((GROVE_PCLQ_POD_INDEX + 1))",
		"$(( 8 * $(W) ))":               "$(( 8 * $(W) ))", // the name read is "( 8 * $(W"
		"x $(W) $((W)) $(W))":           "x 1 $((W)) 1)",
	}
	for in, want := range cases {
		if got := ExpandString(in, vars); got != want {
			t.Errorf("ExpandString(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestExpand(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1",
			Labels: map[string]string{"grove.io/podclique-pod-index": "3", "b": "2", "a": "1"}, Annotations: map[string]string{"k": "v"}},
		Spec:   corev1.PodSpec{NodeName: "n1", ServiceAccountName: "sa"},
		Status: corev1.PodStatus{HostIP: "10.0.0.1"},
	}
	c := &corev1.Container{
		Command: []string{"python3", "-m", "dynamo.vllm"},
		Args:    []string{"--rank", "$(IDX)", "--later", "$(LATER)", "$(SECRET)", "$$(IDX)", "$(FWD)"},
		Env: []corev1.EnvVar{
			fieldEnv("IDX", "metadata.labels['grove.io/podclique-pod-index']"),
			{Name: "FWD", Value: "<$(LATER)>"}, // LATER is defined after FWD, so it stays literal
			fieldEnv("NAME", "metadata.name"), fieldEnv("NS", "metadata.namespace"), fieldEnv("UID", "metadata.uid"),
			fieldEnv("ANN", "metadata.annotations['k']"), fieldEnv("MISSING", "metadata.labels['nope']"),
			fieldEnv("NODE", "spec.nodeName"), fieldEnv("SA", "spec.serviceAccountName"),
			fieldEnv("IP", "status.podIP"), fieldEnv("HOST", "status.hostIP"), fieldEnv("LABELS", "metadata.labels"),
			{Name: "LATER", Value: "$(NAME).$(NS)"},
			{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}},
			{Name: "NAME", Value: "renamed-$(NAME)"}, // redefinition sees the earlier value
		},
	}
	cmd, env, err := Expand(pod, c)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"python3", "-m", "dynamo.vllm", "--rank", "3", "--later", "p.ns", "$(SECRET)", "$(IDX)", "<$(LATER)>"}
	if !slices.Equal(cmd, want) {
		t.Errorf("command\n got %q\nwant %q", cmd, want)
	}
	for k, v := range map[string]string{"UID": "u1", "ANN": "v", "MISSING": "", "NODE": "n1", "SA": "sa", "IP": "",
		"HOST": "10.0.0.1", "NAME": "renamed-p", "LABELS": "a=\"1\"\nb=\"2\"\ngrove.io/podclique-pod-index=\"3\""} {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	if _, ok := env["SECRET"]; ok {
		t.Errorf("secretKeyRef should stay undefined")
	}
	c.Env = append(c.Env, fieldEnv("BAD", "spec.containers"))
	if _, _, err := Expand(pod, c); err == nil {
		t.Errorf("unsupported fieldPath: want error")
	}
}

// TestResolve checks the DNS model against the LWS leader address.
func TestResolve(t *testing.T) {
	pods := cluster(t, lwsDeployer, sglang, 2, 2)
	var peers []*corev1.Pod
	for i := range pods {
		peers = append(peers, &pods[i])
	}
	for _, host := range []string{"llm-vllmworker-0-1.llm-vllmworker-0.team", "llm-vllmworker-0-1.llm-vllmworker-0.team.svc.cluster.local.",
		"LLM-vllmworker-0-1.llm-vllmworker-0.team.svc", "llm-vllmworker-0-1.llm-vllmworker-0"} {
		if got := Resolve(peers, host, "team"); len(got) != 1 || got[0].Name != "llm-vllmworker-0-1" {
			t.Errorf("Resolve(%q) = %v", host, podNames(got))
		}
	}
	for _, host := range []string{"llm-vllmworker-0-1.llm-vllmworker-0", "llm-vllmworker-0-1", "llm-vllmworker-0-1.other.team"} {
		if got := Resolve(peers, host, "elsewhere"); len(got) != 0 {
			t.Errorf("Resolve(%q) from another namespace = %v, want none", host, podNames(got))
		}
	}
}
