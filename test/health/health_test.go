package health

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/test/cluster"
)

// The patch docs/argocd.md tells Argo CD users to apply carries exactly config/argocd/health.lua.
func TestPatchCarriesTheScript(t *testing.T) {
	script, err := os.ReadFile(ScriptPath())
	if err != nil {
		t.Fatal(err)
	}
	if got := patchData(t)["resource.customizations.health.nvidia.com_DynamoGraphDeployment"]; got != string(script) {
		t.Fatalf("argocd-cm-patch.yaml and health.lua differ:\n%s", got)
	}
}

// patchData is the data of config/argocd/argocd-cm-patch.yaml.
func patchData(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(cluster.RepoRoot(), "config", "argocd", "argocd-cm-patch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var patch struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(raw, &patch); err != nil {
		t.Fatal(err)
	}
	return patch.Data
}

// Each branch of the script on a hand-written status (the envtest suites run it on
// statuses the operator wrote).
func TestScriptBranches(t *testing.T) {
	script, err := os.ReadFile(ScriptPath())
	if err != nil {
		t.Fatal(err)
	}
	cond := func(typ, status, reason string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": "m"}
	}
	obj := func(gen, observed int64, phase string, conds ...map[string]any) map[string]any {
		var cs []any
		for _, c := range conds {
			cs = append(cs, c)
		}
		return map[string]any{"metadata": map[string]any{"generation": gen},
			"status": map[string]any{"observedGeneration": observed, "rollingUpdate": map[string]any{"phase": phase, "reason": "Partitioned", "message": "held"}, "conditions": cs}}
	}
	for _, c := range []struct {
		name string
		obj  map[string]any
		want string
	}{
		{"no status", map[string]any{"metadata": map[string]any{"generation": int64(1)}}, "Progressing"},
		{"spec not observed", obj(2, 1, "Completed", cond("Ready", "True", "AllReplicasReady")), "Progressing"},
		{"stalled", obj(2, 2, "Failed", cond("Stalled", "True", "ProgressDeadlineExceeded"), cond("Ready", "False", "ReplicasNotReady")), "Degraded"},
		{"held", obj(2, 2, "Paused", cond("Ready", "True", "Partitioned"), cond("Reconciling", "False", "Partitioned")), "Suspended"},
		{"rolling", obj(2, 2, "InProgress", cond("Reconciling", "True", "RollingUpdate"), cond("Ready", "False", "ReplicasNotReady")), "Progressing"},
		{"done", obj(2, 2, "Completed", cond("Reconciling", "False", "Settled"), cond("Stalled", "False", "NotStalled"), cond("Ready", "True", "AllReplicasReady")), "Healthy"},
	} {
		got, msg, err := Run(string(script), c.obj)
		if err != nil || got != c.want {
			t.Errorf("%s: %s %q (%v), want %s", c.name, got, msg, err, c.want)
		}
		if strings.TrimSpace(msg) == "" {
			t.Errorf("%s: no message", c.name)
		}
	}
}
