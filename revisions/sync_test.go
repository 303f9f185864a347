package revisions

import (
	"context"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// TestSyncRevert walks A -> B -> A -> A: the revert renumbers A instead of adding a
// revision, and a sync without a spec change changes nothing.
func TestSyncRevert(t *testing.T) {
	a := sampleDGD()
	b := withImage(a, "vllm-runtime:0.5.0")
	revA, revB := "vllm-disagg-"+hashOf(a), "vllm-disagg-"+hashOf(b)
	steps := []struct {
		name        string
		dgd         *v1alpha1.DynamoGraphDeployment
		wantUpdate  string
		wantCreated bool
		wantRevs    []string
	}{
		{name: "first spec A", dgd: a, wantUpdate: revA + "@1", wantCreated: true, wantRevs: []string{revA + "@1"}},
		{name: "change to B", dgd: b, wantUpdate: revB + "@2", wantCreated: true, wantRevs: []string{revA + "@1", revB + "@2"}},
		{name: "revert to A", dgd: a, wantUpdate: revA + "@3", wantRevs: []string{revB + "@2", revA + "@3"}},
		{name: "A again", dgd: a, wantUpdate: revA + "@3", wantRevs: []string{revB + "@2", revA + "@3"}},
		{name: "A scaled", dgd: mutate(a, func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["VllmPrefillWorker"].Replicas = ptr(int32(8))
		}), wantUpdate: revA + "@3", wantRevs: []string{revB + "@2", revA + "@3"}},
	}
	for _, impl := range implementations() {
		t.Run(impl.name, func(t *testing.T) {
			h := impl.new(t)
			for _, step := range steps {
				res, err := Sync(context.Background(), h, step.dgd, nil)
				if err != nil {
					t.Fatalf("%s: %v", step.name, err)
				}
				got := names([]*appsv1.ControllerRevision{res.Update})[0]
				if got != step.wantUpdate || res.Created != step.wantCreated {
					t.Errorf("%s: update %s created %v, want %s created %v", step.name, got, res.Created, step.wantUpdate, step.wantCreated)
				}
				if diff := cmp.Diff(step.wantRevs, names(res.Revisions)); diff != "" {
					t.Errorf("%s: result revisions (-want +got):\n%s", step.name, diff)
				}
				if diff := cmp.Diff(step.wantRevs, names(mustList(t, h, step.dgd))); diff != "" {
					t.Errorf("%s: stored revisions (-want +got):\n%s", step.name, diff)
				}
			}
		})
	}
}

func TestSyncCurrentRevision(t *testing.T) {
	a := sampleDGD()
	b := withImage(a, "v2")
	tests := []struct {
		name        string
		currentHash string
		want        string
	}{
		{name: "status names the old revision", currentHash: hashOf(a), want: hashOf(a)},
		{name: "no status yet", currentHash: "", want: hashOf(b)},
		{name: "status names a revision no longer in history", currentHash: "gone", want: hashOf(b)},
	}
	for _, impl := range implementations() {
		for _, tc := range tests {
			t.Run(impl.name+"/"+tc.name, func(t *testing.T) {
				h := impl.new(t, ownedRevision(t, a, 1, 0, a))
				dgd := b.DeepCopy()
				dgd.Status.CurrentRevision = tc.currentHash
				res, err := Sync(context.Background(), h, dgd, nil)
				if err != nil {
					t.Fatal(err)
				}
				if got := HashOf(res.Current); got != tc.want {
					t.Errorf("current = %q, want %q", got, tc.want)
				}
				if got := HashOf(res.Update); got != hashOf(b) {
					t.Errorf("update = %q, want %q", got, hashOf(b))
				}
			})
		}
	}
}

// TestSyncCollision pre-creates a revision with dgd's name but other data: Sync moves
// to collision count 1 and a new name, and keeps the squatter (it may be in use).
func TestSyncCollision(t *testing.T) {
	dgd := sampleDGD()
	squatter := ownedRevision(t, withImage(dgd, "other"), 1, 0, dgd)
	squatter.Name = "vllm-disagg-" + hashOf(dgd)
	for _, impl := range implementations() {
		t.Run(impl.name, func(t *testing.T) {
			res, err := Sync(context.Background(), impl.new(t, squatter), dgd, nil)
			if err != nil {
				t.Fatal(err)
			}
			wantHash := Hash(NewWorkerTemplate(dgd), ptr(int32(1)))
			if res.CollisionCount != 1 || HashOf(res.Update) != wantHash || res.Update.Name != "vllm-disagg-"+wantHash {
				t.Errorf("collisionCount %d update %s, want 1 and vllm-disagg-%s", res.CollisionCount, res.Update.Name, wantHash)
			}
			want := []string{squatter.Name + "@1", "vllm-disagg-" + wantHash + "@2"}
			if diff := cmp.Diff(want, names(res.Revisions)); diff != "" {
				t.Errorf("revisions (-want +got):\n%s", diff)
			}
			// The next sync, with the count persisted in status, reuses the revision.
			dgd := dgd.DeepCopy()
			dgd.Status.CollisionCount = ptr(res.CollisionCount)
			again, err := Sync(context.Background(), impl.new(t, res.Revisions...), dgd, nil)
			if err != nil {
				t.Fatal(err)
			}
			if again.Created || again.Update.Name != res.Update.Name || again.CollisionCount != 1 {
				t.Errorf("second sync: created %v update %s count %d, want reuse of %s", again.Created, again.Update.Name, again.CollisionCount, res.Update.Name)
			}
		})
	}
}

// TestSyncTruncate seeds revisions 1..5 (images v1..v5; the DGD's spec is v5) and checks
// which survive.
func TestSyncTruncate(t *testing.T) {
	version := func(n int) *v1alpha1.DynamoGraphDeployment { return withImage(sampleDGD(), "v"+strconv.Itoa(n)) }
	tests := []struct {
		name    string
		limit   *int32
		current int
		inUse   []int
		want    []int
	}{
		{name: "limit 2, old revision 1 in use", limit: ptr(int32(2)), current: 5, inUse: []int{1}, want: []int{1, 3, 4, 5}},
		{name: "limit 2, nothing in use", limit: ptr(int32(2)), current: 5, want: []int{3, 4, 5}},
		{name: "limit 2, rollout from 3 under way", limit: ptr(int32(2)), current: 3, want: []int{2, 3, 4, 5}},
		{name: "limit 2, 1 and 2 in use", limit: ptr(int32(2)), current: 5, inUse: []int{1, 2}, want: []int{1, 2, 3, 4, 5}},
		{name: "limit 0", limit: ptr(int32(0)), current: 5, want: []int{5}},
		{name: "limit 0, current and in use kept", limit: ptr(int32(0)), current: 2, inUse: []int{4}, want: []int{2, 4, 5}},
		{name: "default limit 10", current: 5, want: []int{1, 2, 3, 4, 5}},
	}
	for _, impl := range implementations() {
		for _, tc := range tests {
			t.Run(impl.name+"/"+tc.name, func(t *testing.T) {
				var seed []*appsv1.ControllerRevision
				for n := 1; n <= 5; n++ {
					seed = append(seed, ownedRevision(t, version(n), int64(n), 0, sampleDGD()))
				}
				dgd := version(5)
				dgd.Spec.RevisionHistoryLimit = tc.limit
				dgd.Status.CurrentRevision = hashOf(version(tc.current))
				inUse := sets.New[string]()
				for _, n := range tc.inUse {
					inUse.Insert(hashOf(version(n)))
				}
				h := impl.new(t, seed...)
				res, err := Sync(context.Background(), h, dgd, inUse)
				if err != nil {
					t.Fatal(err)
				}
				var want []string
				for _, n := range tc.want {
					want = append(want, names(seed[n-1 : n])[0])
				}
				if diff := cmp.Diff(want, names(res.Revisions)); diff != "" {
					t.Errorf("result revisions (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(want, names(mustList(t, h, dgd))); diff != "" {
					t.Errorf("stored revisions (-want +got):\n%s", diff)
				}
				if res.Created || HashOf(res.Update) != hashOf(version(5)) || HashOf(res.Current) != hashOf(version(tc.current)) {
					t.Errorf("created %v update %s current %s", res.Created, res.Update.Name, res.Current.Name)
				}
			})
		}
	}
}

// The status holds the ControllerRevision name, as StatefulSet's does: Sync must find
// the current revision by that name (found by the kubectl plugin's tests).
func TestSyncFindsCurrentRevisionByName(t *testing.T) {
	ctx := context.Background()
	h := NewFake()
	dgd := withImage(sampleDGD(), "img:a")
	first, err := Sync(ctx, h, dgd, nil)
	if err != nil {
		t.Fatal(err)
	}
	dgd = withImage(dgd, "img:b")
	dgd.Status.CurrentRevision = first.Update.Name
	second, err := Sync(ctx, h, dgd, nil)
	if err != nil {
		t.Fatal(err)
	}
	if second.Current == nil || second.Current.Name != first.Update.Name {
		t.Fatalf("current = %v, want %s", second.Current, first.Update.Name)
	}
	if second.Update.Name == first.Update.Name {
		t.Fatal("update revision did not change")
	}
}
