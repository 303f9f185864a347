package app

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// dgdWith returns a DGD "g" at generation 2 with a frontend (1 replica) and a prefill
// worker (4 replicas), whose status is changed by f.
func dgdWith(f func(st *v1alpha1.DynamoGraphDeploymentStatus)) *v1alpha1.DynamoGraphDeployment {
	d := &v1alpha1.DynamoGraphDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "g", Generation: 2},
		Spec: v1alpha1.DynamoGraphDeploymentSpec{Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
			"Frontend": {ComponentType: v1alpha1.ComponentTypeFrontend, Replicas: ptr.To[int32](1)},
			"prefill":  {ComponentType: v1alpha1.ComponentTypePrefill, Replicas: ptr.To[int32](4)},
		}},
		Status: v1alpha1.DynamoGraphDeploymentStatus{
			ObservedGeneration:   2,
			UpdateRevision:       "g-new",
			UpdateRevisionNumber: 2,
			RollingUpdate:        &v1alpha1.RollingUpdateStatus{Phase: v1alpha1.RolloutInProgress},
			Services: map[string]v1alpha1.ServiceStatus{
				"Frontend": {Replicas: 1, ReadyReplicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1},
				"prefill": {Replicas: 4, Workloads: []v1alpha1.WorkloadStatus{
					{Name: "new", Revision: 2, Replicas: 4, ReadyReplicas: 4}}},
			},
		},
	}
	f(&d.Status)
	return d
}

// withSteps gives d three steps: a pause of 2m, a pause until promoted, an analysis.
func withSteps(d *v1alpha1.DynamoGraphDeployment) *v1alpha1.DynamoGraphDeployment {
	d.Spec.Rollout = &v1alpha1.RolloutSpec{Steps: []v1alpha1.RolloutStep{
		{Pause: &v1alpha1.RolloutPause{Duration: &metav1.Duration{Duration: 2 * time.Minute}}},
		{Pause: &v1alpha1.RolloutPause{}},
		{Analysis: &v1alpha1.RolloutAnalysis{}},
	}}
	return d
}

func condition(t, status, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason, Message: "details"}
}

func TestRolloutStatus(t *testing.T) {
	cases := map[string]struct {
		dgd     *v1alpha1.DynamoGraphDeployment
		lines   []string
		done    bool
		wantErr string
	}{
		"a spec change not yet observed waits": {
			dgd:   dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) { st.ObservedGeneration = 1 }),
			lines: []string{"Waiting for dynamographdeployment spec update to be observed...\n"},
		},
		"an invalid spec fails": {
			dgd: dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				st.UpdateRevision = ""
				st.Conditions = []metav1.Condition{condition(v1alpha1.ConditionReady, "False", "InvalidSpec")}
			}),
			wantErr: `dynamographdeployment "g" has an invalid spec: details`,
		},
		"an exceeded progress deadline fails with its reason": {
			dgd: dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				st.Conditions = []metav1.Condition{condition(v1alpha1.ConditionProgressing, "False", "ProgressDeadlineExceeded")}
			}),
			wantErr: `dynamographdeployment "g" exceeded its progress deadline: details`,
		},
		"a blocked rollout fails with its reason": {
			dgd: dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				st.Conditions = []metav1.Condition{condition(v1alpha1.ConditionProgressing, "False", "RolloutBlocked")}
			}),
			wantErr: `dynamographdeployment "g" rollout failed (RolloutBlocked): details`,
		},
		"a refused write fails with the object and the API server's words": {
			dgd: dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				st.Conditions = []metav1.Condition{condition(v1alpha1.ConditionReady, "False", v1alpha1.ReasonWriteRefused),
					condition(v1alpha1.ConditionStalled, "True", v1alpha1.ReasonWriteRefused)}
			}),
			wantErr: `dynamographdeployment "g" cannot go on (WriteRefused): details`,
		},
		"a name someone else holds fails": {
			dgd: dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				st.Conditions = []metav1.Condition{condition(v1alpha1.ConditionStalled, "True", v1alpha1.ReasonNameConflict)}
			}),
			wantErr: `dynamographdeployment "g" cannot go on (NameConflict): details`,
		},
		"a forbidden write is retried": {
			dgd: dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				st.Conditions = []metav1.Condition{condition(v1alpha1.ConditionReady, "False", v1alpha1.ReasonWriteForbidden),
					condition(v1alpha1.ConditionReconciling, "True", v1alpha1.ReasonWriteForbidden)}
			}),
			lines: []string{"Waiting for rollout to finish: the API server forbids a write, retrying: details...\n"},
		},
		"a read the operator cannot make is retried": {
			dgd: dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				st.Conditions = []metav1.Condition{condition(v1alpha1.ConditionReady, "False", v1alpha1.ReasonObserveFailed),
					condition(v1alpha1.ConditionReconciling, "True", v1alpha1.ReasonObserveFailed)}
			}),
			lines: []string{"Waiting for rollout to finish: the operator cannot read what it decides from, retrying: details...\n"},
		},
		"a take-over held by Dynamo's Ingress says so": {
			dgd: dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				st.Conditions = []metav1.Condition{condition(v1alpha1.ConditionTakeOverHeld, "True", v1alpha1.ReasonDynamoIngressHeld)}
			}),
			lines: []string{"Waiting for rollout to finish: DynamoIngressHeld: details...\n"},
		},
		"a restart whose frontend still rolls waits for it": {
			dgd: dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				st.Restart = &v1alpha1.RestartStatus{ObservedID: "r1", Phase: v1alpha1.RestartPhaseRestarting, InProgress: []string{"Frontend"}}
			}),
			lines: []string{"Waiting for rollout to finish: restart r1: Frontend still restarting...\n"},
		},
		"a completed restart is done": {
			dgd: dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				st.RollingUpdate.Phase = v1alpha1.RolloutCompleted
				st.Restart = &v1alpha1.RestartStatus{ObservedID: "r1", Phase: v1alpha1.RestartPhaseCompleted}
			}),
			lines: []string{"dynamographdeployment \"g\" successfully rolled out\n"},
			done:  true,
		},
		"new replicas not all created": {
			dgd: dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				st.Services["prefill"] = v1alpha1.ServiceStatus{Replicas: 5, Workloads: []v1alpha1.WorkloadStatus{
					{Revision: 2, Replicas: 2, ReadyReplicas: 1}, {Revision: 1, Replicas: 3, ReadyReplicas: 3}}}
			}),
			lines: []string{"Waiting for rollout to finish: prefill: 2 out of 4 new replicas have been updated...\n"},
		},
		"old replicas left": {
			dgd: dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				st.Services["prefill"] = v1alpha1.ServiceStatus{Replicas: 5, Workloads: []v1alpha1.WorkloadStatus{
					{Revision: 2, Replicas: 4, ReadyReplicas: 4}, {Revision: 1, Replicas: 1, ReadyReplicas: 1}}}
			}),
			lines: []string{"Waiting for rollout to finish: prefill: 1 old replicas are pending termination...\n"},
		},
		"updated replicas not all ready, frontend updating in place": {
			dgd: dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				st.Services["prefill"] = v1alpha1.ServiceStatus{Replicas: 4, Workloads: []v1alpha1.WorkloadStatus{
					{Revision: 2, Replicas: 4, ReadyReplicas: 2}}}
				st.Services["Frontend"] = v1alpha1.ServiceStatus{Replicas: 1, UpdatedReplicas: 0, AvailableReplicas: 1}
			}),
			lines: []string{
				"Waiting for rollout to finish: Frontend: 0 out of 1 new replicas have been updated...\n",
				"Waiting for rollout to finish: prefill: 2 of 4 updated replicas are available...\n",
			},
		},
		"paused": {
			dgd: dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				st.RollingUpdate = &v1alpha1.RollingUpdateStatus{Phase: v1alpha1.RolloutPaused, Reason: "Paused"}
				st.Services["prefill"] = v1alpha1.ServiceStatus{Replicas: 4, Workloads: []v1alpha1.WorkloadStatus{
					{Revision: 2, Replicas: 1, ReadyReplicas: 1}, {Revision: 1, Replicas: 3, ReadyReplicas: 3}}}
			}),
			lines: []string{
				"Waiting for rollout to finish: paused (resume with \"kubectl dgd rollout resume g\")...\n",
				"Waiting for rollout to finish: prefill: 1 out of 4 new replicas have been updated...\n",
			},
		},
		"held at a pause step until promoted, from the step fields": {
			dgd: withSteps(dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				st.RollingUpdate = &v1alpha1.RollingUpdateStatus{Phase: v1alpha1.RolloutPaused, Reason: "Paused",
					Message: "words the plugin does not read", CurrentStepIndex: ptr.To[int32](1), CurrentStepKind: v1alpha1.StepPause}
			})),
			lines: []string{
				"Waiting for rollout to finish: step 2/3: paused until promoted (promote with \"kubectl dgd rollout promote g\")...\n",
			},
		},
		"held at a timed pause step": {
			dgd: withSteps(dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				end := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
				st.RollingUpdate = &v1alpha1.RollingUpdateStatus{Phase: v1alpha1.RolloutPaused, Reason: "Paused",
					CurrentStepIndex: ptr.To[int32](0), CurrentStepKind: v1alpha1.StepPause, CurrentStepEndTime: &end}
			})),
			lines: []string{
				"Waiting for rollout to finish: step 1/3: paused for 2m0s, until 2026-01-02T03:04:05Z (promote with \"kubectl dgd rollout promote g\")...\n",
			},
		},
		"held at an inconclusive analysis step": {
			dgd: withSteps(dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				st.RollingUpdate = &v1alpha1.RollingUpdateStatus{Phase: v1alpha1.RolloutPaused, Reason: v1alpha1.ReasonAnalysisInconclusive,
					CurrentStepIndex: ptr.To[int32](2), CurrentStepKind: v1alpha1.StepAnalysis}
			})),
			lines: []string{
				"Waiting for rollout to finish: step 3/3: analysis inconclusive, promote or abort (promote with \"kubectl dgd rollout promote g\" or abort with \"kubectl dgd rollout abort g\")...\n",
			},
		},
		"held at a running analysis step": {
			dgd: withSteps(dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				st.RollingUpdate = &v1alpha1.RollingUpdateStatus{Phase: v1alpha1.RolloutPaused, Reason: v1alpha1.ReasonAnalysisRunning,
					CurrentStepIndex: ptr.To[int32](2), CurrentStepKind: v1alpha1.StepAnalysis}
			})),
			lines: []string{
				"Waiting for rollout to finish: step 3/3: analysis running (promote with \"kubectl dgd rollout promote g\")...\n",
			},
		},
		"held at the partition is done": {
			dgd: dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				st.RollingUpdate = &v1alpha1.RollingUpdateStatus{Phase: v1alpha1.RolloutPaused, Reason: "Partitioned"}
				st.Services["prefill"] = v1alpha1.ServiceStatus{Replicas: 4, Workloads: []v1alpha1.WorkloadStatus{
					{Revision: 2, Replicas: 2, ReadyReplicas: 2}, {Revision: 1, Replicas: 2, ReadyReplicas: 2}}}
			}),
			lines: []string{"partitioned roll out complete: prefill 2 of 4 new replicas have been updated...\n"},
			done:  true,
		},
		"a step's partition reached is not done: the next step follows": {
			dgd: withSteps(dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
				st.RollingUpdate = &v1alpha1.RollingUpdateStatus{Phase: v1alpha1.RolloutPaused, Reason: "Partitioned",
					CurrentStepIndex: ptr.To[int32](2), CurrentStepKind: v1alpha1.StepPartition}
				st.Services["prefill"] = v1alpha1.ServiceStatus{Replicas: 4, Workloads: []v1alpha1.WorkloadStatus{
					{Revision: 2, Replicas: 2, ReadyReplicas: 2}, {Revision: 1, Replicas: 2, ReadyReplicas: 2}}}
			})),
			lines: []string{
				"Waiting for rollout to finish: step 3/3 (promote with \"kubectl dgd rollout promote g\")...\n",
				"Waiting for rollout to finish: prefill: 2 out of 4 new replicas have been updated...\n",
			},
		},
		"counts done but the phase not yet Completed waits for the operator": {
			dgd:   dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) { st.RollingUpdate.Message = "draining revision 1" }),
			lines: []string{"Waiting for rollout to finish: draining revision 1...\n"},
		},
		"completed": {
			dgd:   dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) { st.RollingUpdate.Phase = v1alpha1.RolloutCompleted }),
			lines: []string{"dynamographdeployment \"g\" successfully rolled out\n"},
			done:  true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			lines, done, err := rolloutStatus(tc.dgd)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.lines, lines); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
			if done != tc.done {
				t.Errorf("done = %v, want %v", done, tc.done)
			}
		})
	}
}

func TestParsePartition(t *testing.T) {
	for in, ok := range map[string]bool{
		"0": true, "3": true, "0%": true, "50%": true, "100%": true,
		"101%": false, "-1": false, "half": false, "5.5%": false, "%": false, "": false,
	} {
		if _, err := parsePartition(in); (err == nil) != ok {
			t.Errorf("parsePartition(%q) error = %v, want ok %v", in, err, ok)
		}
	}
}
