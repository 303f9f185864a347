package app

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/health"
)

// argoStates are DGDs in the states a user meets an Argo CD action in.
func argoStates() map[string]*v1alpha1.DynamoGraphDeployment {
	base := func(rollout *v1alpha1.RolloutSpec, observed int64, ru *v1alpha1.RollingUpdateStatus, current, update string) *v1alpha1.DynamoGraphDeployment {
		d := &v1alpha1.DynamoGraphDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vllm-disagg", Generation: 3,
				Annotations: map[string]string{"kubernetes.io/change-cause": "vllm-runtime 0.5.0"}},
			Spec: v1alpha1.DynamoGraphDeploymentSpec{Rollout: rollout},
		}
		d.Status.ObservedGeneration, d.Status.RollingUpdate = observed, ru
		d.Status.CurrentRevision, d.Status.UpdateRevision, d.Status.UpdateRevisionNumber = current, update, 4
		return d
	}
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	zero := intstr.FromInt32(0)
	steps := []v1alpha1.RolloutStep{{Partition: pct("75%")}, {Pause: &v1alpha1.RolloutPause{}}, {Partition: pct("25%")}, {Pause: &v1alpha1.RolloutPause{}}}
	ru := func(phase v1alpha1.RolloutPhase, step *int32, attempt int32, abort bool) *v1alpha1.RollingUpdateStatus {
		r := &v1alpha1.RollingUpdateStatus{Phase: phase, CurrentStepIndex: step, Attempt: attempt}
		if abort {
			r.Abort = &v1alpha1.AbortStatus{Reason: "AnalysisFailed"}
		}
		return r
	}
	fresh := base(nil, 0, nil, "", "")
	fresh.Annotations, fresh.Status = nil, v1alpha1.DynamoGraphDeploymentStatus{}
	return map[string]*v1alpha1.DynamoGraphDeployment{
		"just applied":            fresh,
		"rolled out":              base(nil, 3, ru(v1alpha1.RolloutCompleted, nil, 1, false), "r4", "r4"),
		"rolled out, partition 0": base(&v1alpha1.RolloutSpec{Partition: &zero}, 3, ru(v1alpha1.RolloutCompleted, nil, 1, false), "r4", "r4"),
		"partitioned":             base(&v1alpha1.RolloutSpec{Partition: pct("50%")}, 3, ru(v1alpha1.RolloutPaused, nil, 1, false), "r3", "r4"),
		"paused mid-rollout":      base(&v1alpha1.RolloutSpec{Paused: true}, 3, ru(v1alpha1.RolloutPaused, nil, 1, false), "r3", "r4"),
		"rolling":                 base(&v1alpha1.RolloutSpec{}, 3, ru(v1alpha1.RolloutInProgress, nil, 1, false), "r3", "r4"),
		"spec not observed":       base(&v1alpha1.RolloutSpec{Steps: steps}, 2, ru(v1alpha1.RolloutPaused, ptr.To[int32](1), 1, false), "r3", "r4"),
		"step 2/4, held":          base(&v1alpha1.RolloutSpec{Steps: steps}, 3, ru(v1alpha1.RolloutPaused, ptr.To[int32](1), 1, false), "r3", "r4"),
		"last step, held":         base(&v1alpha1.RolloutSpec{Steps: steps}, 3, ru(v1alpha1.RolloutPaused, ptr.To[int32](3), 2, false), "r3", "r4"),
		"steps done":              base(&v1alpha1.RolloutSpec{Steps: steps}, 3, ru(v1alpha1.RolloutInProgress, ptr.To[int32](4), 1, false), "r3", "r4"),
		"steps done, paused":      base(&v1alpha1.RolloutSpec{Steps: steps, Paused: true}, 3, ru(v1alpha1.RolloutPaused, ptr.To[int32](4), 1, false), "r3", "r4"),
		"aborted, attempt 2":      base(&v1alpha1.RolloutSpec{Steps: steps}, 3, ru(v1alpha1.RolloutAborted, ptr.To[int32](1), 2, true), "r3", "r4"),
		"aborted, no attempt yet": base(&v1alpha1.RolloutSpec{}, 3, ru(v1alpha1.RolloutAborted, nil, 0, true), "r3", "r4"),
	}
}

// runVerb runs the kubectl dgd verb of an Argo CD action against a fake API server
// holding dgd: whether it wrote (not an error, not "already ..."), and the DGD after.
func runVerb(t *testing.T, action string, dgd *v1alpha1.DynamoGraphDeployment) (bool, *v1alpha1.DynamoGraphDeployment) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	s := &session{client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(dgd.DeepCopy()).Build(), namespace: dgd.Namespace, scheme: scheme}
	ctx, out, name := context.Background(), &bytes.Buffer{}, dgd.Name
	var err error
	switch action {
	case "promote", "promote-full":
		err = s.promote(ctx, out, name, action == "promote-full")
	case "abort":
		err = s.abort(ctx, out, name)
	case "retry":
		err = s.retry(ctx, out, name)
	case "pause":
		err = s.patchRollout(ctx, out, name, "paused", "already paused", isPaused, pauseFields)
	case "resume":
		err = s.patchRollout(ctx, out, name, "resumed", "already resumed", isResumed, resumeFields)
	default:
		t.Fatalf("no verb for action %s", action)
	}
	after := &v1alpha1.DynamoGraphDeployment{}
	if gerr := s.client.Get(ctx, client.ObjectKeyFromObject(dgd), after); gerr != nil {
		t.Fatal(gerr)
	}
	return err == nil && !strings.Contains(out.String(), " already "), after
}

// Each Argo CD action (config/argocd/actions) is offered exactly when its kubectl dgd
// verb would write, and then leaves the DGD exactly as the verb's merge patch does:
// every state of argoStates, every action, compared as typed objects.
func TestArgoCDActionsWriteWhatTheVerbsWrite(t *testing.T) {
	discovery, err := health.ReadAction("discovery")
	if err != nil {
		t.Fatal(err)
	}
	enabledSomewhere := map[string]int{}
	for state, dgd := range argoStates() {
		dgd.APIVersion, dgd.Kind = v1alpha1.GroupVersion.String(), "DynamoGraphDeployment"
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(dgd)
		if err != nil {
			t.Fatal(err)
		}
		disabled, err := health.Discover(discovery, obj)
		if err != nil {
			t.Fatalf("%s: discovery: %v", state, err)
		}
		for _, action := range health.Actions {
			wrote, want := runVerb(t, action, dgd)
			if disabled[action] == wrote {
				t.Errorf("%s: action %s disabled=%v, but its verb wrote=%v", state, action, disabled[action], wrote)
				continue
			}
			if !wrote {
				continue
			}
			enabledSomewhere[action]++
			script, err := health.ReadAction(action)
			if err != nil {
				t.Fatal(err)
			}
			ret, err := health.RunAction(script, obj)
			if err != nil {
				t.Fatalf("%s: action %s: %v", state, action, err)
			}
			raw, err := json.Marshal(ret)
			if err != nil {
				t.Fatal(err)
			}
			got := &v1alpha1.DynamoGraphDeployment{}
			if err := json.Unmarshal(raw, got); err != nil {
				t.Fatalf("%s: action %s returned %s: %v", state, action, raw, err)
			}
			got.ResourceVersion, want.ResourceVersion = "", ""
			got.TypeMeta, want.TypeMeta = metav1.TypeMeta{}, metav1.TypeMeta{}
			if !equality.Semantic.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Errorf("%s: action %s wrote\n%s\nthe verb wrote\n%s", state, action, g, w)
			}
		}
	}
	for _, action := range health.Actions {
		if enabledSomewhere[action] == 0 {
			t.Errorf("action %s is enabled in no state: the comparison never ran", action)
		}
	}
}
