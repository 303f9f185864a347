package revisions

import (
	"context"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// TestSyncRevert walks A -> B -> A -> A: the revert renumbers A instead of adding a
// revision, and a sync without a spec change changes nothing.
func TestSyncRevert(t *testing.T) {
	a := sampleDGD()
	b := withImage(a, "vllm-runtime:0.5.0")
	revA, revB := nameOf(a), nameOf(b)
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
	squatter.Name = nameOf(dgd)
	for _, impl := range implementations() {
		t.Run(impl.name, func(t *testing.T) {
			res, err := Sync(context.Background(), impl.new(t, squatter), dgd, nil)
			if err != nil {
				t.Fatal(err)
			}
			wantHash := Hash(NewWorkerTemplate(dgd), ptr(int32(1)))
			if res.CollisionCount != 1 || HashOf(res.Update) != wantHash || res.Update.Name != nameOf(dgd, 1) {
				t.Errorf("collisionCount %d update %s, want 1 and %s", res.CollisionCount, res.Update.Name, nameOf(dgd, 1))
			}
			want := []string{squatter.Name + "@1", nameOf(dgd, 1) + "@2"}
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

// TestSyncWholeGraph: a frontend-only change is a revision of its own that shares the
// workers' hash (so nothing rolls), its revert renumbers the earlier one, a change cause
// recorded after the change reaches the update revision, and revisions sharing an
// in-use worker hash do not pin history.
func TestSyncWholeGraph(t *testing.T) {
	frontend := func(d *v1alpha1.DynamoGraphDeployment, image string) *v1alpha1.DynamoGraphDeployment {
		return mutate(d, func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["Frontend"].ExtraPodSpec = &v1alpha1.ExtraPodSpec{MainContainer: &corev1.Container{Image: image}}
		})
	}
	for _, impl := range implementations() {
		t.Run(impl.name, func(t *testing.T) {
			ctx := context.Background()
			h := impl.new(t)
			sync := func(d *v1alpha1.DynamoGraphDeployment, inUse ...string) Result {
				t.Helper()
				res, err := Sync(ctx, h, d, sets.New(inUse...))
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			a := frontend(sampleDGD(), "f:1")
			first := sync(a)
			b := frontend(a, "f:2")
			second := sync(b, HashOf(first.Update))
			if !second.Created || second.Update.Name == first.Update.Name || HashOf(second.Update) != HashOf(first.Update) {
				t.Fatalf("frontend change: update %s (worker hash %s, created %v), want a new revision with worker hash %s",
					second.Update.Name, HashOf(second.Update), second.Created, HashOf(first.Update))
			}
			if diff := cmp.Diff([]string{first.Update.Name + "@1", second.Update.Name + "@2"}, names(second.Revisions)); diff != "" {
				t.Errorf("revisions (-want +got):\n%s", diff)
			}
			// kubectl annotate after the change: the update revision takes the cause.
			b.Annotations = map[string]string{v1alpha1.AnnotationChangeCause: "frontend 2"}
			third := sync(b, HashOf(first.Update))
			if got := third.Update.Annotations[v1alpha1.AnnotationChangeCause]; got != "frontend 2" || third.Update.Name != second.Update.Name {
				t.Errorf("update %s change cause %q, want %s with %q", third.Update.Name, got, second.Update.Name, "frontend 2")
			}
			if got := mustList(t, h, b)[1].Annotations[v1alpha1.AnnotationChangeCause]; got != "frontend 2" {
				t.Errorf("stored change cause %q, want %q", got, "frontend 2")
			}
			// Back to f:1: revision 1 is renumbered, not duplicated.
			back := sync(a, HashOf(first.Update))
			if back.Created || back.Update.Name != first.Update.Name || back.Update.Revision != 3 {
				t.Errorf("revert: update %s@%d created %v, want %s@3", back.Update.Name, back.Update.Revision, back.Created, first.Update.Name)
			}
			// Limit 0, current = update, workers in use: of the two revisions sharing the
			// running workers' hash only the newest stays.
			a.Spec.RevisionHistoryLimit = ptr(int32(0))
			a.Status.CurrentRevision = back.Update.Name
			last := sync(a, HashOf(first.Update))
			if diff := cmp.Diff([]string{first.Update.Name + "@3"}, names(last.Revisions)); diff != "" {
				t.Errorf("truncated revisions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSyncUpgradeFromWorkersOnly: a DGD whose history an operator before whole-graph
// revisions wrote (workers only, named by the worker hash) gets one new revision with
// the same worker hash, so nothing rolls, and its old revisions stay readable.
func TestSyncUpgradeFromWorkersOnly(t *testing.T) {
	dgd := sampleDGD()
	legacy := func(d *v1alpha1.DynamoGraphDeployment, n int64) *appsv1.ControllerRevision {
		rev := workersOnly(t, ownedRevision(t, d, n, 0, sampleDGD()))
		rev.Name = RevisionName(d.Name, hashOf(d))
		return rev
	}
	old, running := legacy(withImage(dgd, "v0"), 1), legacy(dgd, 2)
	dgd.Status.CurrentRevision = running.Name
	for _, impl := range implementations() {
		t.Run(impl.name, func(t *testing.T) {
			res, err := Sync(context.Background(), impl.new(t, old, running), dgd, sets.New(hashOf(dgd)))
			if err != nil {
				t.Fatal(err)
			}
			if !res.Created || res.Update.Revision != 3 || HashOf(res.Update) != HashOf(running) || res.Current.Name != running.Name {
				t.Errorf("update %s@%d (worker hash %s, created %v), current %s; want a new revision 3 with worker hash %s, current %s",
					res.Update.Name, res.Update.Revision, HashOf(res.Update), res.Created, res.Current.Name, HashOf(running), running.Name)
			}
			if HashOf(old) != hashOf(withImage(dgd, "v0")) {
				t.Errorf("HashOf(workers-only revision) = %s, want %s", HashOf(old), hashOf(withImage(dgd, "v0")))
			}
		})
	}
}
