package render

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/dgd-rollout/operator/test/gangs"
)

// kubeletEnv is a container's env once the kubelet resolved it: what `$(NAME)`
// expands to, and what the process (and so its shell) starts with.
var kubeletEnv = map[string]string{"DYNAMO_RANK": "2", "DYNAMO_LEADER_ADDRESS": "llm-0-w-0-w-ldr-0.llm-0.ns.svc.cluster.local",
	"POD_NAME": "llm-0-w-0-w-wkr-xyz", "GROVE_PCLQ_POD_INDEX": "1", "HOME": "/root"}

// TestKubeToShell: a command line moved into `sh -c` runs as the kubelet would have run
// it. Each case is written by hand, then checked against the kubelet's expansion
// (test/gangs.ExpandString, a port of k8s.io/kubernetes' expansion package) and a real
// sh: the argv the kubelet passes for words equals what sh passes after the kubelet
// expanded the script.
func TestKubeToShell(t *testing.T) {
	cases := map[string]struct {
		words []string
		want  string
	}{
		"plain words pass bare":            {strs("python3", "-m", "dynamo.vllm"), "python3 -m dynamo.vllm"},
		"a reference becomes the shell's":  {strs("--node-rank", "$(DYNAMO_RANK)"), `--node-rank "${DYNAMO_RANK}"`},
		"references inside a word":         {strs("--name=$(POD_NAME).$(DYNAMO_RANK)"), `--name="${POD_NAME}"."${DYNAMO_RANK}"`},
		"spaces around a reference quoted": {strs("a b$(POD_NAME)c"), `"a b""${POD_NAME}"c`},
		"$$ is the kubelet's literal $":    {strs("$$(DYNAMO_RANK)"), `"\$$(DYNAMO_RANK)"`},
		"a lone $ stays literal":           {strs("cost $5", "$HOME"), `"cost \$$5" "\$$HOME"`},
		"$(( is no reference":              {strs("$((1 + 2))"), `"\$$((1 + 2))"`},
		"an unterminated $( is literal":    {strs("$(x"), `"\$$(x"`},
		"an empty word stays a word":       {strs("--x", ""), `--x ""`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := kubeToShell(tc.words)
			if got != tc.want {
				t.Errorf("kubeToShell(%q) = %s, want %s", tc.words, got, tc.want)
			}
			var kubelet []string
			for _, w := range tc.words {
				kubelet = append(kubelet, gangs.ExpandString(w, kubeletEnv))
			}
			if out, ok := realShell(t, "exec printf '%s\\n' "+got); ok && out != strings.Join(kubelet, "\n")+"\n" {
				t.Errorf("sh passes %q, the kubelet %q", out, kubelet)
			}
		})
	}
}

// TestAliasRefsToShell: in a script, the kubelet's references to the aliases become the
// shell's (with shellQuote's escape before one), the rest stays as written; a real sh
// then sees the exported rank and the env's address.
func TestAliasRefsToShell(t *testing.T) {
	cases := map[string]struct{ script, want, sh string }{
		"bare references": {"exec echo $(DYNAMO_RANK) $(DYNAMO_LEADER_ADDRESS)", "exec echo ${DYNAMO_RANK} ${DYNAMO_LEADER_ADDRESS}",
			"2 llm-0-w-0-w-ldr-0.llm-0.ns.svc.cluster.local\n"},
		`shellQuote's \$ inside double quotes`: {`exec echo "--rank=\$(DYNAMO_RANK)" "\$(DYNAMO_LEADER_ADDRESS)"`,
			`exec echo "--rank=${DYNAMO_RANK}" "${DYNAMO_LEADER_ADDRESS}"`, "--rank=2 llm-0-w-0-w-ldr-0.llm-0.ns.svc.cluster.local\n"},
		"other references and shell text kept": {`exec echo $(POD_NAME) $HOME $$(DYNAMO_RANK) $((GROVE_PCLQ_POD_INDEX + 1))`,
			`exec echo $(POD_NAME) $HOME $$(DYNAMO_RANK) $((GROVE_PCLQ_POD_INDEX + 1))`, ""},
		"inside $(( )) the kubelet reads no reference": {"exec echo $(( 8 * $(DYNAMO_RANK) ))", "exec echo $(( 8 * $(DYNAMO_RANK) ))", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := aliasRefsToShell(tc.script)
			if got != tc.want {
				t.Errorf("aliasRefsToShell(%s) = %s, want %s", tc.script, got, tc.want)
			}
			if tc.sh == "" {
				return
			}
			env := map[string]string{"DYNAMO_LEADER_ADDRESS": kubeletEnv["DYNAMO_LEADER_ADDRESS"], "GROVE_PCLQ_POD_INDEX": "1"}
			if out, ok := realShellEnv(t, groveRankExport+got, env); ok && out != tc.sh {
				t.Errorf("sh prints %q, want %q", out, tc.sh)
			}
		})
	}
}

// TestExportRank: a Grove worker's shell script gets the export first (its script is
// args[0], also with more args for $0...), any other command line is run by sh -c, and
// a container without a command is left alone.
func TestExportRank(t *testing.T) {
	cases := map[string]struct{ in, want corev1.Container }{
		"script": {corev1.Container{Command: strs("/bin/sh", "-c"), Args: strs("sshd -D")},
			corev1.Container{Command: strs("/bin/sh", "-c"), Args: strs(groveRankExport + "sshd -D")}},
		"script with positional args": {corev1.Container{Command: strs("sh", "-c"), Args: strs(`exec serve "$0"`, "x")},
			corev1.Container{Command: strs("sh", "-c"), Args: strs(groveRankExport+`exec serve "$0"`, "x")}},
		"python": {corev1.Container{Command: strs("python3", "-m", "dynamo.vllm"), Args: strs("--node-rank", "$(DYNAMO_RANK)")},
			corev1.Container{Command: strs("sh", "-c"), Args: strs(groveRankExport + `exec python3 -m dynamo.vllm --node-rank "${DYNAMO_RANK}"`)}},
		"bash -lc is a command line": {corev1.Container{Command: strs("bash", "-lc", "serve $(DYNAMO_RANK)")},
			corev1.Container{Command: strs("sh", "-c"), Args: strs(groveRankExport + `exec bash -lc "serve ""${DYNAMO_RANK}"`)}},
		"no command": {corev1.Container{Args: strs("--x")}, corev1.Container{Args: strs("--x")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := tc.in
			exportRank(&c)
			if d := cmp.Diff(tc.want, c); d != "" {
				t.Errorf("-want +got\n%s", d)
			}
		})
	}
}

func strs(s ...string) []string { return s }

// realShell runs script with /bin/sh after the kubelet's expansion against kubeletEnv,
// in the environment the kubelet gives the process; ok is false without a sh.
func realShell(t *testing.T, script string) (string, bool) {
	return realShellEnv(t, script, kubeletEnv)
}

func realShellEnv(t *testing.T, script string, env map[string]string) (string, bool) {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		return "", false
	}
	cmd := exec.Command(sh, "-c", gangs.ExpandString(script, env))
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Logf("sh -c %q: %v: %s", script, err, out)
	}
	return string(out), true
}
