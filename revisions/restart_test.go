package revisions

import (
	"encoding/json"
	"testing"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/render"
)

func withRestart(dgd *v1alpha1.DynamoGraphDeployment, raw string) *v1alpha1.DynamoGraphDeployment {
	return mutate(dgd, func(d *v1alpha1.DynamoGraphDeployment) {
		d.Spec.Restart = &v1alpha1.Raw{}
		d.Spec.Restart.Raw = []byte(raw)
	})
}

// TestRestartHash: a restart id changes the worker hash and the graph hash and puts
// nvidia.com/restartAt on every service; the same id twice hashes the same; a DGD
// without an id (or with spec.restart but no id) hashes byte for byte as TestHashGolden
// pins, so an operator upgrade rolls no DGD that never asked for a restart.
func TestRestartHash(t *testing.T) {
	base := sampleDGD()
	for _, d := range []*v1alpha1.DynamoGraphDeployment{base, withRestart(base, `{}`), withRestart(base, `{"strategy":{"type":"Parallel"}}`)} {
		if got := hashOf(d); got != "9670987e" {
			t.Errorf("hash without a restart id = %q, want TestHashGolden's 9670987e", got)
		}
		if got := nameOf(d); got != "vllm-disagg-2ee846c6" {
			t.Errorf("revision name without a restart id = %q, want TestHashGolden's", got)
		}
		if WithRestart(d) != d {
			t.Error("WithRestart without an id must return the DGD itself")
		}
	}
	a, a2, b := withRestart(base, `{"id":"a"}`), withRestart(base, `{"id":"a","strategy":{"type":"Parallel"}}`), withRestart(base, `{"id":"b"}`)
	if hashOf(a) == hashOf(base) || hashOf(a) == hashOf(b) || nameOf(a) == nameOf(base) || nameOf(a) == nameOf(b) {
		t.Errorf("a restart id must change the worker and graph hashes: base %s a %s b %s", hashOf(base), hashOf(a), hashOf(b))
	}
	if hashOf(a) != hashOf(a2) || nameOf(a) != nameOf(a2) {
		t.Error("the strategy is no pod template: the same id with another strategy must hash the same")
	}
	eff := WithRestart(a)
	for _, name := range a.ServiceNames() {
		if got := eff.Spec.Services[name].Annotations[v1alpha1.AnnotationRestartAt]; got != "a" {
			t.Errorf("service %s: %s = %q, want a", name, v1alpha1.AnnotationRestartAt, got)
		}
		if _, ok := a.Spec.Services[name].Annotations[v1alpha1.AnnotationRestartAt]; ok {
			t.Errorf("WithRestart modified the DGD's service %s", name)
		}
	}
	if hashOf(eff) != hashOf(a) || nameOf(eff) != nameOf(a) {
		t.Error("WithRestart of its own result must hash the same")
	}
}

// TestRestartIDAfterRemoval: once spec.restart is removed, the id last acted on
// (status.restart.observedID) stays on the pods, as Dynamo keeps the annotation of a
// completed restart: removing spec.restart restarts nothing.
func TestRestartIDAfterRemoval(t *testing.T) {
	a := withRestart(sampleDGD(), `{"id":"a"}`)
	gone := mutate(a, func(d *v1alpha1.DynamoGraphDeployment) {
		d.Spec.Restart = nil
		d.Status.Restart = &v1alpha1.RestartStatus{ObservedID: "a", Phase: v1alpha1.RestartPhaseCompleted}
	})
	if hashOf(gone) != hashOf(a) {
		t.Errorf("removing spec.restart after restart a: hash %s, want %s", hashOf(gone), hashOf(a))
	}
}

// TestRestartRestore: an undo restores the services without the restart annotation
// (the id stays spec.restart's), and the restored spec with the same id hashes as the
// revision; the revision's data names its id.
func TestRestartRestore(t *testing.T) {
	a := withRestart(withImage(sampleDGD(), "img:1"), `{"id":"a"}`)
	rev, err := NewRevision(a, 1, ptr(int32(0)))
	if err != nil {
		t.Fatal(err)
	}
	var data RevisionData
	if err := json.Unmarshal(rev.Data.Raw, &data); err != nil || data.RestartID != "a" {
		t.Fatalf("revision data restartID = %q (%v), want a", data.RestartID, err)
	}
	now := withRestart(sampleDGD(), `{"id":"a"}`)
	spec, err := Restore(now, rev)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range spec.Services {
		if _, ok := s.Annotations[v1alpha1.AnnotationRestartAt]; ok {
			t.Errorf("restored service %s carries %s", name, v1alpha1.AnnotationRestartAt)
		}
	}
	restored := now.DeepCopy()
	restored.Spec = *spec
	if hashOf(restored) != HashOf(rev) {
		t.Errorf("restored with the same id: hash %s, want the revision's %s", hashOf(restored), HashOf(rev))
	}
}

// TestRestartChangeCause: the revision a new restart makes says "restart <id>" unless
// the DGD names its own change cause; a DGD being created (no update revision yet) or
// a restart already acted on says nothing.
func TestRestartChangeCause(t *testing.T) {
	running := func(raw string, observed string) *v1alpha1.DynamoGraphDeployment {
		return mutate(withRestart(sampleDGD(), raw), func(d *v1alpha1.DynamoGraphDeployment) {
			d.Status.UpdateRevision = "vllm-disagg-2ee846c6"
			if observed != "" {
				d.Status.Restart = &v1alpha1.RestartStatus{ObservedID: observed, Phase: v1alpha1.RestartPhaseCompleted}
			}
		})
	}
	cases := []struct {
		name string
		dgd  *v1alpha1.DynamoGraphDeployment
		want string
	}{
		{"new restart", running(`{"id":"x"}`, ""), "restart x"},
		{"new id after another", running(`{"id":"y"}`, "x"), "restart y"},
		{"acted on", running(`{"id":"x"}`, "x"), ""},
		{"being created", withRestart(sampleDGD(), `{"id":"x"}`), ""},
		{"own change cause", mutate(running(`{"id":"x"}`, ""), func(d *v1alpha1.DynamoGraphDeployment) {
			d.Annotations = map[string]string{v1alpha1.AnnotationChangeCause: "mine"}
		}), "mine"},
	}
	for _, tc := range cases {
		rev, err := NewRevision(tc.dgd, 2, ptr(int32(0)))
		if err != nil {
			t.Fatal(err)
		}
		if got := rev.Annotations[v1alpha1.AnnotationChangeCause]; got != tc.want {
			t.Errorf("%s: change cause %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestRestartRendersEveryComponent: with a restart id, the pod template render builds
// for every component (frontend, prefill, decode) carries nvidia.com/restartAt with the
// id, and without one none does.
func TestRestartRendersEveryComponent(t *testing.T) {
	for _, tc := range []struct {
		dgd  *v1alpha1.DynamoGraphDeployment
		want string
	}{{sampleDGD(), ""}, {withRestart(sampleDGD(), `{"id":"r1"}`), "r1"}} {
		eff := WithRestart(tc.dgd)
		for _, name := range eff.ServiceNames() {
			c := render.Component{DGD: eff, Name: name, Spec: eff.Spec.Services[name], Hash: hashOf(eff)}
			if !eff.Spec.Services[name].IsWorker() {
				c.Hash = ""
			}
			pod, err := c.Pod(render.RoleMain, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := pod.Annotations[v1alpha1.AnnotationRestartAt]; got != tc.want {
				t.Errorf("id %q, service %s: pod annotation %q", tc.want, name, got)
			}
		}
	}
}
