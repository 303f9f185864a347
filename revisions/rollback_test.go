package revisions

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

func TestRestore(t *testing.T) {
	// old is what revision 1 recorded: envs, Grove, and an extra worker "Aux".
	old := mutate(sampleDGD(), func(d *v1alpha1.DynamoGraphDeployment) {
		d.Spec.Envs = []corev1.EnvVar{{Name: "OLD", Value: "1"}}
		d.Spec.Backend = v1alpha1.BackendGrove
		d.Spec.Services["Aux"] = sampleWorker("", 3)
	})
	// now: new image, new replicas, "Aux" removed, "Spare" worker added, frontend changed.
	now := mutate(withImage(sampleDGD(), "v2"), func(d *v1alpha1.DynamoGraphDeployment) {
		d.Spec.Services["VllmDecodeWorker"].Replicas = ptr(int32(6))
		d.Spec.Services["VllmPrefillWorker"].Replicas = nil
		d.Spec.Services["Spare"] = sampleWorker("decode", 1)
		d.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = "frontend:2"
		d.Spec.RevisionHistoryLimit = ptr(int32(4))
	})
	nowCopy := now.DeepCopy()
	rev := ownedRevision(t, old, 1, 2, old)

	spec, err := Restore(now, rev)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(nowCopy, now); diff != "" {
		t.Errorf("Restore modified its input (-before +after):\n%s", diff)
	}
	want := old.Spec.DeepCopy()
	want.Services["VllmDecodeWorker"].Replicas = ptr(int32(6)) // current replicas kept
	want.Services["VllmPrefillWorker"].Replicas = nil          // current (unset) kept
	want.RevisionHistoryLimit = ptr(int32(4))                  // not part of a revision
	// The frontend is restored as any service (its image back to old's); "Aux" comes
	// back with its recorded 3 replicas; "Spare" is gone.
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Errorf("restored spec (-want +got):\n%s", diff)
	}

	// A revision an earlier operator wrote knows the workers only: the frontend stays.
	spec, err = Restore(now, workersOnly(t, rev))
	if err != nil {
		t.Fatal(err)
	}
	want.Services["Frontend"] = now.Spec.Services["Frontend"]
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Errorf("restored spec from a workers-only revision (-want +got):\n%s", diff)
	}
	restored := &v1alpha1.DynamoGraphDeployment{Spec: *spec}
	if got := Hash(NewWorkerTemplate(restored), ptr(int32(2))); got != HashOf(rev) {
		t.Errorf("hash of restored spec = %q, want the revision's %q", got, HashOf(rev))
	}
}

// TestRestoreRoundTrip rolls back through Sync: A, B, then Restore(A) renumbers A to 3
// and the restored DGD's update revision is A's, by name and hash.
func TestRestoreRoundTrip(t *testing.T) {
	a := sampleDGD()
	b := mutate(withImage(a, "v2"), func(d *v1alpha1.DynamoGraphDeployment) {
		d.Spec.Services["VllmDecodeWorker"].Replicas = ptr(int32(5))
		d.Spec.Envs = []corev1.EnvVar{{Name: "NEW", Value: "1"}}
	})
	for _, impl := range implementations() {
		t.Run(impl.name, func(t *testing.T) {
			ctx := context.Background()
			h := impl.new(t)
			for _, d := range []*v1alpha1.DynamoGraphDeployment{a, b} {
				if _, err := Sync(ctx, h, d, nil); err != nil {
					t.Fatal(err)
				}
			}
			target := FindRevision(mustList(t, h, b), 1)
			if target == nil {
				t.Fatal("revision 1 not found")
			}
			spec, err := Restore(b, target)
			if err != nil {
				t.Fatal(err)
			}
			rolledBack := b.DeepCopy()
			rolledBack.Spec = *spec
			if got := rolledBack.Spec.Services["VllmDecodeWorker"].DesiredReplicas(); got != 5 {
				t.Errorf("decode replicas after rollback = %d, want the current 5", got)
			}
			res, err := Sync(ctx, h, rolledBack, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Created || res.Update.Name != target.Name || res.Update.Revision != 3 || len(res.Revisions) != 2 {
				t.Errorf("after rollback: created %v, update %v, revisions %v; want %s renumbered to 3 of 2",
					res.Created, names([]*appsv1.ControllerRevision{res.Update}), names(res.Revisions), target.Name)
			}
			if got := hashOf(rolledBack); got != HashOf(target) {
				t.Errorf("hash of rolled-back DGD = %q, want %q", got, HashOf(target))
			}
		})
	}
}

func TestFindRevision(t *testing.T) {
	revs := []*appsv1.ControllerRevision{{Revision: 2}, {Revision: 5}}
	tests := []struct {
		name   string
		number int64
		want   *appsv1.ControllerRevision
	}{
		{name: "present", number: 5, want: revs[1]},
		{name: "absent", number: 3, want: nil},
		{name: "zero", number: 0, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := FindRevision(revs, tc.number); got != tc.want {
				t.Errorf("FindRevision(%d) = %v, want %v", tc.number, got, tc.want)
			}
		})
	}
}

func TestRestoreBadData(t *testing.T) {
	if _, err := Restore(sampleDGD(), &appsv1.ControllerRevision{}); err == nil {
		t.Error("Restore of a revision without data succeeded, want an error")
	}
}
