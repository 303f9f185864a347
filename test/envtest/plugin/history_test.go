package plugin_test

import (
	. "github.com/onsi/ginkgo/v2"

	"github.com/dgd-rollout/operator/test/harness"
)

var _ = Describe("rollout history", func() {
	It("lists revisions with their change cause, and prints one revision's worker templates", func() {
		ns := newNamespace()
		deploy(withCause(harness.NewDGD(ns, "hist").Disagg(2, 1, "vllm:v1").Obj(), "kubectl apply -f disagg.yaml"))
		rollImage(ns, "hist", "vllm:v2", 2)

		t := &transcript{ns: ns}
		t.must("rollout", "history", "hist")
		t.must("rollout", "history", "hist", "--revision=1")
		t.fails("rollout", "history", "hist", "--revision=7")
		expectGolden("history", t.String())
	})
})

var _ = Describe("an unknown DynamoGraphDeployment", func() {
	It("is the API server's NotFound error for every command", func() {
		t := &transcript{ns: newNamespace()}
		t.fails("rollout", "history", "nope")
		t.fails("rollout", "status", "nope")
		t.fails("rollout", "undo", "nope")
		t.fails("rollout", "pause", "nope")
		t.fails("rollout", "resume", "nope")
		t.fails("rollout", "partition", "nope", "50%")
		t.fails("rollout", "promote", "nope")
		expectGolden("not-found", t.String())
	})

	It("and wrong arguments are reported before connecting", func() {
		t := &transcript{ns: newNamespace()}
		t.fails("rollout", "status")
		t.fails("rollout", "partition", "x")
		t.fails("rollout", "undo", "x", "--dry-run=maybe")
		expectGolden("bad-args", t.String())
	})
})
