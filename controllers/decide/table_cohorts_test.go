package decide_test

import (
	"fmt"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
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
	return out
}

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
