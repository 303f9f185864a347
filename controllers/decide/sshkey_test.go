package decide_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/test/harness"
)

// TestSSHKeyCreatedUntilKnown: a DGD with multinode TRT-LLM workers gets its SSH key
// Secret by a create, pass after pass, until a create made it or found it (the
// reconciler's SSHKeys): the operator never reads a Secret (issue 38, least privilege).
func TestSSHKeyCreatedUntilKnown(t *testing.T) {
	dgd := harness.NewDGD("ns", "g").Worker("worker", harness.TRTLLM, "", 1, 2, "trtllm:1").Backend(v1alpha1.BackendLeaderWorkerSet).Obj()
	for _, tc := range []struct {
		name  string
		known map[string]bool
		want  bool
	}{
		{"not known: created", nil, true},
		{"known: nothing to do", map[string]bool{"g-mpi-ssh": true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(dgd.DeepCopy())
			w.backends = map[v1alpha1.BackendType]backends.Description{v1alpha1.BackendDeployment: deployment, v1alpha1.BackendLeaderWorkerSet: lwsBackend}
			s := w.snapshot()
			s.SSHKeys = tc.known
			for _, n := range decide.Lookups(s.DGD) {
				if strings.HasPrefix(n.Key(), "Secret/") {
					t.Fatalf("a lookup reads Secret %s", n.Object.GetName())
				}
			}
			d := decide.Decide(s)
			for range 3 {
				if !d.Needs.Any() {
					break
				}
				w.answerHolders(s, d.Needs.Holders)
				d = decide.Decide(s)
			}
			got := slices.ContainsFunc(d.Writes, func(wr decide.Write) bool { return wr.Op == decide.CreateSSHKey })
			if got != tc.want {
				t.Errorf("CreateSSHKey written: %v, want %v (writes %v)", got, tc.want, d.Writes)
			}
		})
	}
}
