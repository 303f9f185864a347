package revisions

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

func TestCreateSetsOwnerReference(t *testing.T) {
	for _, impl := range implementations() {
		t.Run(impl.name, func(t *testing.T) {
			h := impl.new(t)
			dgd := sampleDGD()
			count := int32(0)
			rev, err := h.Create(context.Background(), dgd, ownedRevision(t, dgd, 1, 0, nil), &count)
			if err != nil {
				t.Fatal(err)
			}
			want := []metav1.OwnerReference{{
				APIVersion:         "nvidia.com/v1beta1", // the served storage version: owners survive v1alpha1 being unserved
				Kind:               "DynamoGraphDeployment",
				Name:               "vllm-disagg",
				UID:                "dgd-uid-1",
				Controller:         ptr(true),
				BlockOwnerDeletion: ptr(true),
			}}
			listed := mustList(t, h, dgd)
			if len(listed) != 1 {
				t.Fatalf("listed %d revisions, want 1", len(listed))
			}
			for _, got := range []*appsv1.ControllerRevision{rev, listed[0]} {
				if diff := cmp.Diff(want, got.OwnerReferences); diff != "" {
					t.Errorf("owner references (-want +got):\n%s", diff)
				}
				if got.Name != nameOf(dgd) || got.Revision != 1 || count != 0 {
					t.Errorf("got %s@%d collisionCount %d, want %s@1 and 0", got.Name, got.Revision, count, nameOf(dgd))
				}
			}
		})
	}
}

func TestCreateCollisions(t *testing.T) {
	dgd := sampleDGD()
	other := mutate(sampleDGD(), func(d *v1alpha1.DynamoGraphDeployment) { d.UID = "other-uid" })
	// squatter returns a revision named like dgd's (collision count 0) holding data.
	squatter := func(data *v1alpha1.DynamoGraphDeployment, owner *v1alpha1.DynamoGraphDeployment) *appsv1.ControllerRevision {
		rev := ownedRevision(t, data, 1, 0, owner)
		rev.Name = nameOf(dgd)
		return rev
	}
	tests := []struct {
		name      string
		existing  *appsv1.ControllerRevision
		wantCount int32
	}{
		{name: "different data: collision", existing: squatter(withImage(dgd, "v0"), dgd), wantCount: 1},
		{name: "equal data, other owner: collision", existing: squatter(dgd, other), wantCount: 1},
		{name: "equal data, orphan: collision", existing: squatter(dgd, nil), wantCount: 1},
		{name: "equal data, same owner: existing returned", existing: squatter(dgd, dgd), wantCount: 0},
	}
	for _, impl := range implementations() {
		for _, tc := range tests {
			t.Run(impl.name+"/"+tc.name, func(t *testing.T) {
				h := impl.new(t, tc.existing)
				count := int32(0)
				got, err := h.Create(context.Background(), dgd, ownedRevision(t, dgd, 2, 0, nil), &count)
				if err != nil {
					t.Fatal(err)
				}
				if count != tc.wantCount {
					t.Errorf("collisionCount = %d, want %d", count, tc.wantCount)
				}
				wantHash := Hash(NewWorkerTemplate(dgd), &tc.wantCount)
				if got.Name != nameOf(dgd, tc.wantCount) || HashOf(got) != wantHash {
					t.Errorf("created %s (hash label %q), want hash %q", got.Name, HashOf(got), wantHash)
				}
				if !Equal(got, ownedRevision(t, dgd, 1, 0, nil)) {
					t.Error("created revision does not record dgd's template")
				}
			})
		}
	}
}

func TestCreateNeedsCollisionCount(t *testing.T) {
	for _, impl := range implementations() {
		t.Run(impl.name, func(t *testing.T) {
			dgd := sampleDGD()
			if _, err := impl.new(t).Create(context.Background(), dgd, ownedRevision(t, dgd, 1, 0, nil), nil); err == nil {
				t.Error("Create with nil collisionCount succeeded, want an error")
			}
		})
	}
}

func TestListFilters(t *testing.T) {
	dgd := sampleDGD()
	recreated := mutate(dgd, func(d *v1alpha1.DynamoGraphDeployment) { d.UID = "old-uid" })
	otherNS := mutate(dgd, func(d *v1alpha1.DynamoGraphDeployment) { d.Namespace = "other" })
	mine3 := ownedRevision(t, withImage(dgd, "v3"), 3, 0, dgd)
	mine1 := ownedRevision(t, withImage(dgd, "v1"), 1, 0, dgd)
	seed := []*appsv1.ControllerRevision{
		mine3,
		ownedRevision(t, withImage(dgd, "old"), 2, 0, recreated),
		ownedRevision(t, withImage(dgd, "orphan"), 4, 0, nil),
		ownedRevision(t, withImage(otherNS, "ns"), 5, 0, otherNS),
		mine1,
	}
	for _, impl := range implementations() {
		t.Run(impl.name, func(t *testing.T) {
			got := names(mustList(t, impl.new(t, seed...), dgd))
			if diff := cmp.Diff(names([]*appsv1.ControllerRevision{mine1, mine3}), got); diff != "" {
				t.Errorf("List (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenumberAndDelete(t *testing.T) {
	dgd := sampleDGD()
	rev := ownedRevision(t, dgd, 1, 0, dgd)
	for _, impl := range implementations() {
		t.Run(impl.name, func(t *testing.T) {
			ctx := context.Background()
			h := impl.new(t, rev)
			listed := mustList(t, h, dgd)
			got, err := h.Renumber(ctx, listed[0], 5)
			if err != nil {
				t.Fatal(err)
			}
			if got.Revision != 5 || listed[0].Revision != 1 {
				t.Errorf("Renumber returned revision %d (input now %d), want 5 (input unchanged 1)", got.Revision, listed[0].Revision)
			}
			if after := mustList(t, h, dgd); len(after) != 1 || after[0].Revision != 5 || !Equal(after[0], rev) {
				t.Errorf("after Renumber: %v, want one revision numbered 5 with unchanged data", names(after))
			}
			for i := range 2 { // the second Delete finds nothing: still success
				if err := h.Delete(ctx, got); err != nil {
					t.Fatalf("Delete #%d: %v", i+1, err)
				}
			}
			if after := mustList(t, h, dgd); len(after) != 0 {
				t.Errorf("after Delete: %v, want none", names(after))
			}
			if _, err := h.Renumber(ctx, got, 6); !apierrors.IsNotFound(err) {
				t.Errorf("Renumber of a deleted revision: %v, want NotFound", err)
			}
		})
	}
}

func TestFakeReactor(t *testing.T) {
	boom := errors.New("boom")
	f := NewFake()
	f.Reactor = func(verb string, _ *appsv1.ControllerRevision) error {
		if verb == VerbList {
			return boom
		}
		return nil
	}
	if _, err := f.List(context.Background(), sampleDGD()); !errors.Is(err, boom) {
		t.Errorf("List error = %v, want %v", err, boom)
	}
	if _, err := Sync(context.Background(), f, sampleDGD(), nil); !errors.Is(err, boom) {
		t.Errorf("Sync error = %v, want %v", err, boom)
	}
	if all := f.All(); len(all) != 0 {
		t.Errorf("stored %v, want nothing", names(all))
	}
}
