package faults_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/test/faults"
)

func newFake() client.Client {
	return fake.NewClientBuilder().WithScheme(app.NewScheme()).
		WithStatusSubresource(&appsv1.Deployment{}, &v1alpha1.DynamoGraphDeployment{}).Build()
}

func deployment(name string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}
}

// run makes n creates, n patches, n status updates and n deletes and returns the faults.
func run(t *testing.T, c *faults.Client, n int) []error {
	t.Helper()
	ctx := context.Background()
	var errs []error
	for i := range n {
		d := deployment(fmt.Sprintf("d%d", i))
		for {
			err := c.Create(ctx, d)
			if err == nil {
				break
			}
			errs = append(errs, err)
		}
		if err := c.Patch(ctx, d, client.MergeFrom(d.DeepCopy())); err != nil {
			errs = append(errs, err)
		}
		if err := c.Status().Update(ctx, d); err != nil {
			errs = append(errs, err)
		}
		if err := c.SubResource("status").Patch(ctx, d, client.MergeFrom(d.DeepCopy())); err != nil {
			errs = append(errs, err)
		}
		if err := c.Delete(ctx, d); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func TestRateCodesAndCounts(t *testing.T) {
	c := faults.New(newFake(), faults.Config{Rate: 0.2, Seed: 1})
	errs := run(t, c, 200)
	st := c.Stats()
	if st.Injected != len(errs) {
		t.Fatalf("counted %d faults, saw %d", st.Injected, len(errs))
	}
	if share := float64(st.Injected) / float64(st.Writes); math.Abs(share-0.2) > 0.04 {
		t.Fatalf("fault share %.3f, want about 0.2 (%s)", share, st)
	}
	for _, err := range errs {
		if !faults.IsInjected(err) {
			t.Fatalf("not an injected fault: %v", err)
		}
		if !apierrors.IsConflict(err) && !apierrors.IsInternalError(err) && !apierrors.IsTooManyRequests(err) {
			t.Fatalf("unexpected error kind: %v", err)
		}
	}
	for _, code := range []faults.Code{faults.InternalError, faults.TooManyRequests, faults.Conflict} {
		if st.ByCode[code] == 0 {
			t.Fatalf("no %d injected: %s", code, st)
		}
	}
	for _, w := range []string{"create Deployment", "patch Deployment", "update Deployment/status", "patch Deployment/status", "delete Deployment"} {
		if st.ByWrite[w] == 0 {
			t.Fatalf("no fault in %q: %s", w, st)
		}
	}
	t.Log(st)
}

func TestSeedReplays(t *testing.T) {
	a := faults.New(newFake(), faults.Config{Rate: 0.3, Seed: 42})
	b := faults.New(newFake(), faults.Config{Rate: 0.3, Seed: 42})
	ea, eb := run(t, a, 50), run(t, b, 50)
	if len(ea) != len(eb) {
		t.Fatalf("same seed, %d vs %d faults", len(ea), len(eb))
	}
	for i := range ea {
		if ea[i].Error() != eb[i].Error() {
			t.Fatalf("fault %d differs: %v vs %v", i, ea[i], eb[i])
		}
	}
}

func TestReadsNeverFailAndRateZero(t *testing.T) {
	c := faults.New(newFake(), faults.Config{Rate: 1, Seed: 3})
	ctx := context.Background()
	if err := c.Create(ctx, deployment("x")); err == nil {
		t.Fatal("rate 1: a create went through")
	}
	var list appsv1.DeploymentList
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	c.SetRate(0)
	if errs := run(t, c, 20); len(errs) != 0 {
		t.Fatalf("rate 0: %v", errs)
	}
}

func TestInjectAndAfterWrite(t *testing.T) {
	c := faults.New(newFake(), faults.Config{Seed: 9})
	ctx := context.Background()
	c.Inject(2, faults.Conflict, faults.On(faults.OpPatch, "Deployment", "", "ns"))
	d := deployment("y")
	var seen []string
	c.AfterWrite(func(_ context.Context, w faults.Write, err error) { seen = append(seen, w.String()) })
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		err := c.Patch(ctx, d, client.MergeFrom(d.DeepCopy()))
		if i < 2 && !apierrors.IsConflict(err) {
			t.Fatalf("patch %d: want an injected conflict, got %v", i, err)
		}
		if i == 2 && err != nil {
			t.Fatalf("patch %d: %v", i, err)
		}
	}
	if c.Pending() != 0 || c.Stats().Injected != 2 {
		t.Fatalf("pending %d, stats %s", c.Pending(), c.Stats())
	}
	if len(seen) != 2 || seen[0] != "create Deployment ns/y" || seen[1] != "patch Deployment ns/y" {
		t.Fatalf("after-write hook saw %v (injected faults never reach the server)", seen)
	}
}

// TestAfterCommit: a fault after commit applies the write and returns 500 or 504; the
// caller's object is left as sent (no resourceVersion from the lost answer); a retried
// create then finds the object (AlreadyExists), a retried delete finds none.
func TestAfterCommit(t *testing.T) {
	ctx := context.Background()
	raw := newFake()
	c := faults.New(raw, faults.Config{Seed: 5})
	c.InjectAfterCommit(1, faults.Timeout, faults.On(faults.OpCreate, "Deployment", "", "ns"))
	c.InjectAfterCommit(1, faults.InternalError, faults.On(faults.OpDelete, "Deployment", "", "ns"))
	d := deployment("z")
	err := c.Create(ctx, d)
	if !apierrors.IsTimeout(err) || !faults.IsInjected(err) {
		t.Fatalf("create: %v, want an injected 504", err)
	}
	if d.ResourceVersion != "" || d.UID != "" {
		t.Errorf("the lost answer reached the caller's object: resourceVersion %q, uid %q", d.ResourceVersion, d.UID)
	}
	var got appsv1.Deployment
	if err := raw.Get(ctx, client.ObjectKeyFromObject(d), &got); err != nil {
		t.Fatalf("the create was not applied: %v", err)
	}
	if err := c.Create(ctx, deployment("z")); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("retried create: %v, want AlreadyExists", err)
	}
	if err := c.Delete(ctx, &got); !apierrors.IsInternalError(err) {
		t.Fatalf("delete: %v, want an injected 500", err)
	}
	if err := c.Delete(ctx, &got); !apierrors.IsNotFound(err) {
		t.Fatalf("retried delete: %v, want NotFound (the first was applied)", err)
	}
	st := c.Stats()
	if st.Injected != 2 || st.AfterCommit != 2 || st.ByCode[faults.Timeout] != 1 || st.AfterCommitByWrite["delete Deployment"] != 1 {
		t.Fatalf("stats %s", st)
	}

	// At random: a share of the faults, after commit, each applied.
	r := faults.New(newFake(), faults.Config{Rate: 0.3, Seed: 2, AfterCommitShare: 0.5})
	applied := 0
	for i := range 300 {
		d := deployment(fmt.Sprintf("r%d", i))
		err := r.Create(ctx, d)
		var live appsv1.Deployment
		if r.Get(ctx, client.ObjectKeyFromObject(d), &live) == nil && err != nil {
			applied++
			if !apierrors.IsInternalError(err) && !apierrors.IsTimeout(err) {
				t.Fatalf("an applied create answered %v", err)
			}
		}
	}
	if st := r.Stats(); st.AfterCommit != applied || applied < 20 || st.Injected-st.AfterCommit < 20 {
		t.Fatalf("%d creates applied behind a fault; stats %s", applied, st)
	}
}
