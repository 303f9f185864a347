package gangs

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestShell(t *testing.T) {
	env := map[string]string{"GROVE_PCLQ_POD_INDEX": "2", "A": "x y", "LWS_LEADER_ADDRESS": "w-0.w.ns", "EMPTY": ""}
	cases := []struct {
		name string
		cmd  []string
		want []string
		err  string
	}{
		{"not a shell", []string{"python3", "-m", "dynamo.vllm", "$A"}, []string{"python3", "-m", "dynamo.vllm", "$A"}, ""},
		{"exec and arithmetic", []string{"sh", "-c", "exec python3 -m m --node-rank $((GROVE_PCLQ_POD_INDEX + 1)) --headless"},
			[]string{"python3", "-m", "m", "--node-rank", "3", "--headless"}, ""},
		{"nested arithmetic", []string{"/bin/sh", "-c", "exec python3 -m m --r $(( 8 * $((GROVE_PCLQ_POD_INDEX + 1)) )) --s $(( (1+2)*-3 % 4 / 1 ))"},
			[]string{"python3", "-m", "m", "--r", "24", "--s", "-1"}, ""},
		{"arith with $VAR and ${VAR}", []string{"bash", "-c", "python3 -m m $(($GROVE_PCLQ_POD_INDEX*${GROVE_PCLQ_POD_INDEX}+UNSET))"},
			[]string{"python3", "-m", "m", "4"}, ""},
		{"quotes and splitting", []string{"sh", "-c", `python3 -m m $A "$A" '$A' "a\"b\$c\d" x\ y ""`},
			[]string{"python3", "-m", "m", "x", "y", "x y", "$A", `a"b$c\d`, "x y", ""}, ""},
		{"defaults", []string{"sh", "-c", "python3 -m m ${MISSING:-d1} ${EMPTY:-d2} ${EMPTY-d3} ${A:+set} $EMPTY"},
			[]string{"python3", "-m", "m", "d1", "d2", "set"}, ""},
		{"last python module step", []string{"/bin/sh", "-c", "ray start --head --port=6379 && python3 -m dynamo.vllm --x 1; echo done"},
			[]string{"python3", "-m", "dynamo.vllm", "--x", "1"}, ""},
		{"no launch step: last step", []string{"sh", "-ec", "mkdir -p $HOME/.ssh && /usr/sbin/sshd -D -f $HOME/.ssh/sshd_config 2>&1"},
			[]string{"/usr/sbin/sshd", "-D", "-f", "/h/.ssh/sshd_config"}, ""},
		{"assignments before", []string{"sh", "-c", `export LEADER_HOST="${LWS_LEADER_ADDRESS}" P=1 && exec python3 -m w $LEADER_HOST:$P`},
			[]string{"python3", "-m", "w", "w-0.w.ns:1"}, ""},
		{"mpirun host list", []string{"sh", "-c", `x && mpirun $([ "$(id -u)" = "0" ] && echo --allow-run-as-root) -n 4 -H $LWS_LEADER_ADDRESS,$(echo "$LWS_LEADER_ADDRESS" | sed 's/\./-1\./') bash -c 'a b'`},
			[]string{"mpirun", "--allow-run-as-root", "-n", "4", "-H", "w-0.w.ns,w-0-1.w.ns", "bash", "-c", "a b"}, ""},
		{"unknown command substitution", []string{"sh", "-c", "exec python3 -m m $(( 8 * $(LWS_WORKER_INDEX) ))"}, nil, "LWS_WORKER_INDEX"},
		{"bad arithmetic", []string{"sh", "-c", "python3 -m m $((A + 1))"}, nil, "illegal number"},
		{"unterminated quote", []string{"sh", "-c", "python3 -m m 'x"}, nil, "unterminated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := map[string]string{"HOME": "/h"}
			for k, v := range env {
				e[k] = v
			}
			got, err := Shell(tc.cmd, e)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to mention %q (argv %q)", err, tc.err, got)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("Shell(%q)\n got %q, %v\nwant %q", tc.cmd, got, err, tc.want)
			}
		})
	}
}

// TestShellMatchesRealSh runs the rendered worker scripts under the system sh.
// The launchers are replaced by a program that prints its argv, and the result must equal Shell's.
func TestShellMatchesRealSh(t *testing.T) {
	sh, err := exec.LookPath("sh")
	for _, tool := range []string{"sed", "id", "basename"} {
		if _, e := exec.LookPath(tool); e != nil {
			err = e
		}
	}
	if err != nil {
		t.Skipf("no POSIX sh and tools: %v", err)
	}
	dir := t.TempDir()
	fake := "#!/bin/sh\nprintf '%s\\0' \"$(basename \"$0\")\" \"$@\"; printf '\\036\\0'\n"
	for _, name := range []string{"python3", "ray", "mpirun"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var scripts []*Member
	for _, r := range []render{vllmMP, sglang, vllmDP, vllmRay} {
		for _, g := range GroupGrove(cluster(t, groveDeployer, r, 4, 1)) {
			scripts = append(scripts, g.Members[1:]...)
		}
	}
	for _, g := range GroupLWS(cluster(t, lwsDeployer, trtllm, 4, 1)) {
		m := *g.Leader // only the mpirun step: the others touch $HOME and /ssh-pk
		script := m.Expanded[2]
		m.Expanded = []string{"sh", "-c", script[strings.Index(script, "mpirun "):]}
		scripts = append(scripts, &m)
	}
	for _, m := range scripts {
		if !isShellCommand(m.Expanded) {
			continue
		}
		cmd := exec.Command(sh, m.Expanded[1:]...)
		cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin"}
		for k, v := range m.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: sh failed: %v", m.Pod.Name, err)
		}
		recs := strings.Split(strings.TrimSuffix(string(out), "\x1e\x00"), "\x1e\x00")
		real := strings.Split(strings.TrimSuffix(recs[len(recs)-1], "\x00"), "\x00")
		ours, err := Shell(m.Expanded, m.Env)
		if err != nil || !slices.Equal(ours, real) {
			t.Errorf("%s:\n sh    %q\n Shell %q (%v)", m.Pod.Name, real, ours, err)
		}
	}
}

// TestShellEnv: what a `sh -c` script exports before its launch step reaches the
// process it execs (a Grove worker's DYNAMO_RANK); a plain assignment does not.
func TestShellEnv(t *testing.T) {
	env := map[string]string{"GROVE_PCLQ_POD_INDEX": "2", "DYNAMO_RANK": ""}
	got := ShellEnv([]string{"sh", "-c", "export DYNAMO_RANK=$((GROVE_PCLQ_POD_INDEX + 1)); LOCAL=1; exec python3 -m dynamo.sglang --node-rank $DYNAMO_RANK"}, env)
	if got["DYNAMO_RANK"] != "3" || got["LOCAL"] != "" {
		t.Errorf("process env %v: want DYNAMO_RANK=3 exported, LOCAL not", got)
	}
	if got := ShellEnv([]string{"python3", "-m", "dynamo.vllm"}, env); got["DYNAMO_RANK"] != "" || len(got) != 2 {
		t.Errorf("no shell: %v, want env as is", got)
	}
}
