package app

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

func TestPrintList(t *testing.T) {
	stepped := func(ns, name string, index *int32) v1alpha1.DynamoGraphDeployment {
		d := dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
			st.Ready = "5/5"
			st.RollingUpdate.Phase = v1alpha1.RolloutPaused
			st.RollingUpdate.CurrentStepIndex = index
		})
		d.Namespace, d.Name = ns, name
		d.Spec.Rollout = &v1alpha1.RolloutSpec{Steps: []v1alpha1.RolloutStep{{}, {}, {}}}
		return *d
	}
	plain := *dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) {
		st.Ready, st.RollingUpdate.Phase, st.UpdateRevisionNumber = "5/5", v1alpha1.RolloutCompleted, 4
	})
	plain.Namespace = "b"
	fresh := *dgdWith(func(st *v1alpha1.DynamoGraphDeploymentStatus) { *st = v1alpha1.DynamoGraphDeploymentStatus{} })
	fresh.Namespace, fresh.Name = "b", "new"
	dgds := []v1alpha1.DynamoGraphDeployment{
		plain, fresh,
		stepped("a", "first-step", ptr.To[int32](0)),
		stepped("a", "steps-done", ptr.To[int32](3)),
		stepped("a", "steps-unknown", nil),
	}
	cases := map[string]struct {
		dgds []v1alpha1.DynamoGraphDeployment
		all  bool
		want string
	}{
		"every namespace, sorted, steps 1-based": {
			dgds: dgds, all: true,
			want: "" +
				"NAMESPACE   NAME            READY    PHASE       STEP   REVISION\n" +
				"a           first-step      5/5      Paused      1/3    2\n" +
				"a           steps-done      5/5      Paused      3/3    2\n" +
				"a           steps-unknown   5/5      Paused      -/3    2\n" +
				"b           g               5/5      Completed   -      4\n" +
				"b           new             <none>   <none>      -      <none>\n",
		},
		"one namespace": {
			dgds: dgds[:1],
			want: "" +
				"NAME   READY   PHASE       STEP   REVISION\n" +
				"g      5/5     Completed   -      4\n",
		},
		"none in the namespace": {want: "No resources found in b namespace.\n"},
		"none anywhere":         {all: true, want: "No resources found.\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := printList(&out, tc.dgds, tc.all, "b"); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}
