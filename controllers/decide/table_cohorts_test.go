package decide_test

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/test/harness"
)

// upgrade is a Dynamo upgrade: the frontend's and every worker's image in one edit.
func upgrade(tag string) func(*v1alpha1.DynamoGraphDeployment) {
	return func(d *v1alpha1.DynamoGraphDeployment) {
		harness.SetImage(d, "img:"+tag)
		d.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.7." + tag
	}
}

func frontends(mode v1alpha1.FrontendMode) func(*v1alpha1.DynamoGraphDeployment) {
	return func(d *v1alpha1.DynamoGraphDeployment) {
		if d.Spec.Rollout == nil {
			d.Spec.Rollout = &v1alpha1.RolloutSpec{}
		}
		d.Spec.Rollout.Frontends = mode
	}
}

// cohortCases are the rollouts of cohorts (spec.rollout.frontends) on the Deployment
// backend, through the world's proxy (fakeProxy, its agents applying every split at
// once unless a case says otherwise).
func cohortCases(t *testing.T) []tcase {
	var out []tcase
	// Auto: a Dynamo upgrade on a settled graph with a shared frontend. The prelude
	// makes the running revision's cohort frontend and retires the shared one, then the
	// rollout moves each cohort's frontend with its workers, the split follows the
	// ready capacity, and the old cohort goes once its weight 0 is in effect.
	w := settledWorld(t, disagg(2, 2).Obj())
	w.agent = true
	out = append(out, walk(t, w, "auto/upgrade", upgrade("2"), []variant{allReady, newNone, oldOneShort})...)
	// Once a DGD has cohorts, a change of the workers alone is a cohort too.
	out = append(out, walk(t, w, "auto/upgrade/workers-only", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "img:9") }, []variant{allReady})...)
	// A frontend-only change updates the cohort's frontend in place.
	out = append(out, walk(t, w, "auto/upgrade/frontend-only", func(d *v1alpha1.DynamoGraphDeployment) {
		d.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.7.9"
	}, []variant{allReady})...)
	// Shared brings the shared frontend back (the postlude): made, selected, then the
	// cohort's frontend and the proxy go.
	out = append(out, walk(t, w, "auto/upgrade/shared", frontends(v1alpha1.FrontendsShared), []variant{allReady})...)

	// PerRevision from the first deploy.
	w = newWorld(disagg(2, 2).Obj())
	w.dgd.Spec.Rollout = &v1alpha1.RolloutSpec{Frontends: v1alpha1.FrontendsPerRevision}
	w.agent = true
	out = append(out, walk(t, w, "per-revision/first-deploy", nil, []variant{allReady, newNone})...)

	// A proxy that applies nothing: the old cohort's drain holds the rollout.
	w = settledWorld(t, disagg(2, 2).Obj())
	w.agent = true
	walk(t, w, "", frontends(v1alpha1.FrontendsPerRevision), nil)
	w.agent = false
	out = append(out, walk2(t, w, "per-revision/proxy-stuck", upgrade("5"), 6, []variant{allReady})...)

	// Requests in flight hold the old cohort's removal until they are done.
	w = settledWorld(t, disagg(2, 2).Obj())
	w.agent = true
	walk(t, w, "", frontends(v1alpha1.FrontendsPerRevision), nil)
	w.inflight = map[string]int64{}
	for _, wl := range w.workloads {
		if wl.Hash != "" {
			w.inflight[wl.Hash] = 3
		}
	}
	out = append(out, walk2(t, w, "per-revision/in-flight", upgrade("6"), 8, []variant{allReady})...)
	w.inflight = nil
	out = append(out, walk(t, w, "per-revision/in-flight/done", nil, []variant{allReady})...)

	// A canary of steps: setWeight 25, a header route, setWeight 50, then the rest.
	w = settledWorld(t, disagg(4, 4).Obj())
	w.agent = true
	walk(t, w, "", frontends(v1alpha1.FrontendsPerRevision), nil)
	out = append(out, walk(t, w, "steps", func(d *v1alpha1.DynamoGraphDeployment) {
		upgrade("3")(d)
		frontends(v1alpha1.FrontendsPerRevision)(d)
		d.Spec.Rollout.Steps = []v1alpha1.RolloutStep{{SetWeight: ptr.To(int32(25))},
			{SetHeaderRoute: &v1alpha1.HeaderRoute{Name: "X-Canary", Value: "yes"}}, {SetWeight: ptr.To(int32(50))}, {Pause: &v1alpha1.RolloutPause{}}}
	}, []variant{allReady, newNone})...)
	// Aborted at the pause: 100% back on the stable cohort first.
	out = append(out, walk(t, w, "steps/aborted", annotate(v1alpha1.AnnotationAbort, "2/1"), []variant{allReady})...)
	return append(out, groveCohortCases(t)...)
}

// groveCohortCases are cohorts on the Grove backend's real description (HoldsPools,
// StableSideBySide), a frontend of 2: every cohort's frontend is a PodCliqueSet of its
// own (backends/grove cohort.go), made in the prelude beside the running revision's
// workers, replaced side by side by a frontend-only change (the old one outdated, gone
// once the new one has 2 - ⌊2/4⌋ = 2 ready), deleted whole with its drained revision.
func groveCohortCases(t *testing.T) []tcase {
	var out []tcase
	w := newWorld(disagg(2, 2).Backend(v1alpha1.BackendGrove).Obj())
	w.backends = map[v1alpha1.BackendType]backends.Description{v1alpha1.BackendGrove: groveBackend}
	w.dgd.Spec.Services["Frontend"].Replicas = ptr.To[int32](2)
	w.settle(t)
	w.agent = true
	out = append(out, walk(t, w, "grove/upgrade", upgrade("2"), []variant{allReady, newNone, oldOneShort})...)
	onlyRevision(t, w, "after the upgrade", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.7.2")
	// PerRevision, the revision's workers run without its frontend (the pool's Ensure
	// failed between the workers' PodCliqueSet and the frontend's; under Auto, a DGD
	// with no cohort frontend left and no rollout is shared again): it is made at 1.
	s := w.snapshot()
	s.Workloads = slices.DeleteFunc(s.Workloads, func(wl decide.Workload) bool { return wl.Service == "Frontend" })
	frontends(v1alpha1.FrontendsPerRevision)(s.DGD)
	key := backends.Key{Service: "Frontend", Hash: w.dgd.Status.UpdateWorkerHash}
	s.Names[key] = cohortClique(w.dgd.Name, key, 1) // Backend.Name: nothing holds the key, its first name
	out = append(out, cases("grove/upgrade/workers-without-frontend", s, []variant{allReady})...)
	out = append(out, walk(t, w, "grove/upgrade/frontend-only", func(d *v1alpha1.DynamoGraphDeployment) {
		d.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.7.9"
	}, []variant{allReady, newFrontNone, newFrontOneShort})...)
	onlyRevision(t, w, "after the frontend-only change", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.7.9")
	return out
}

// onlyRevision fails unless the world holds nothing but the update revision's
// PodCliqueSets: its workers' and its cohort frontend's of image frontend, one each.
func onlyRevision(t *testing.T, w *world, when, frontend string) {
	t.Helper()
	hash := w.dgd.Status.UpdateWorkerHash
	groups := map[string]bool{}
	for name, wl := range w.workloads {
		if wl.Hash != hash || wl.Outdated {
			t.Errorf("%s: %s (%s@%s, outdated %v) is left", when, name, wl.Service, wl.Hash, wl.Outdated)
		}
		if f, ok := w.fronts[name]; ok && f.template != frontend {
			t.Errorf("%s: %s runs %s, want %s", when, name, f.template, frontend)
		}
		groups[wl.Group.Name] = true
	}
	if len(groups) != 2 {
		t.Errorf("%s: PodCliqueSets %v, want the update revision's workers' and its frontend's", when, sortedStrings(groups))
	}
}

// frontReadiness varies the ready replicas of the cohort frontends that replace an
// outdated one of their key (a frontend-only change on a side-by-side backend).
func frontReadiness(name string, ready func(replicas int32) int32) variant {
	return variant{name, func(s *decide.Snapshot) {
		outdated := map[backends.Key]bool{}
		for _, w := range s.Workloads {
			outdated[w.Key] = outdated[w.Key] || w.Outdated
		}
		for i := range s.Workloads {
			if w := &s.Workloads[i]; outdated[w.Key] && !w.Outdated && !w.Terminating {
				w.Ready = ready(w.Replicas)
			}
		}
	}}
}

var (
	newFrontNone     = frontReadiness("new-frontend-none-ready", func(int32) int32 { return 0 })
	newFrontOneShort = frontReadiness("new-frontend-one-unready", func(r int32) int32 { return max(r-1, 0) })
)

// walk2 is walk for a rollout that does not settle: it plays n passes and emits each.
func walk2(t *testing.T, w *world, prefix string, change func(*v1alpha1.DynamoGraphDeployment), n int, vs []variant) []tcase {
	t.Helper()
	if change != nil {
		w.edit(change)
	}
	var out []tcase
	for i := range n {
		s, d := w.decideFor(t)
		out = append(out, cases(fmt.Sprintf("%s/pass-%d", prefix, i), s, vs)...)
		w.apply(t, d, true)
	}
	return out
}
