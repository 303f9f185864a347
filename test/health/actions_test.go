package health

import (
	"testing"

	"sigs.k8s.io/yaml"
)

// The patch docs/argocd.md tells Argo CD users to apply carries exactly config/argocd/actions,
// in Argo CD's resource.customizations.actions.<group_kind> format (discovery.lua, then
// definitions of name and action.lua).
func TestPatchCarriesTheActions(t *testing.T) {
	var actions struct {
		Discovery   string `json:"discovery.lua"`
		Definitions []struct {
			Name   string `json:"name"`
			Action string `json:"action.lua"`
		} `json:"definitions"`
	}
	if err := yaml.UnmarshalStrict([]byte(patchData(t)["resource.customizations.actions.nvidia.com_DynamoGraphDeployment"]), &actions); err != nil {
		t.Fatal(err)
	}
	want, err := ReadAction("discovery")
	if err != nil {
		t.Fatal(err)
	}
	if actions.Discovery != want {
		t.Errorf("argocd-cm-patch.yaml's discovery.lua and actions/discovery.lua differ:\n%s", actions.Discovery)
	}
	if len(actions.Definitions) != len(Actions) {
		t.Fatalf("%d definitions, want %d (%v)", len(actions.Definitions), len(Actions), Actions)
	}
	for i, d := range actions.Definitions {
		want, err := ReadAction(Actions[i])
		if err != nil {
			t.Fatal(err)
		}
		if d.Name != Actions[i] || d.Action != want {
			t.Errorf("definition %d (%s) differs from actions/%s/action.lua:\n%s", i, d.Name, Actions[i], d.Action)
		}
	}
}

// Discovery lists every action, each with its flag, on any object, even one with no
// spec.rollout and no status (a DGD just applied).
func TestDiscoveryListsEveryAction(t *testing.T) {
	script, err := ReadAction("discovery")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Discover(script, map[string]any{"metadata": map[string]any{"name": "d", "generation": int64(1)}, "spec": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"promote": true, "promote-full": true, "abort": true, "retry": true, "pause": false, "resume": true}
	for _, a := range Actions {
		if d, ok := got[a]; !ok || d != want[a] {
			t.Errorf("%s: disabled %v (listed %v), want %v", a, d, ok, want[a])
		}
	}
	if len(got) != len(Actions) {
		t.Errorf("discovery lists %v, want %v", got, Actions)
	}
}
