package controllers

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// liveReader is the API server: it counts reads and returns the DGD at rv.
type liveReader struct {
	rv    string
	reads int
}

func (l *liveReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	l.reads++
	obj.(*v1alpha1.DynamoGraphDeployment).ObjectMeta = metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, ResourceVersion: l.rv}
	return nil
}

func (l *liveReader) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func TestFreshReadsPastACacheBehindOurStatusWrite(t *testing.T) {
	live := &liveReader{rv: "12"}
	r := &Reconciler{APIReader: live}
	key := types.NamespacedName{Namespace: "ns", Name: "g"}
	cached := func(rv string) *v1alpha1.DynamoGraphDeployment {
		return &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, ResourceVersion: rv}}
	}
	d := cached("9")
	if err := r.fresh(context.Background(), d); err != nil || live.reads != 0 || d.ResourceVersion != "9" {
		t.Fatalf("no status written yet: the cache is used (reads %d, rv %s, err %v)", live.reads, d.ResourceVersion, err)
	}
	r.statusRV.Store(key, written{rv: "10"})
	for _, c := range []struct {
		rv    string
		reads int
		want  string
	}{
		{"9", 1, "12"},  // the cache predates our write: read past it
		{"10", 1, "10"}, // the cache shows our write
		{"11", 1, "11"}, // and more
		{"x", 1, "x"},   // a resourceVersion that does not parse: the cache, a conflict then retries
	} {
		d := cached(c.rv)
		if err := r.fresh(context.Background(), d); err != nil || live.reads != c.reads || d.ResourceVersion != c.want {
			t.Fatalf("cached rv %s: reads %d (want %d), rv %s (want %s), err %v", c.rv, live.reads, c.reads, d.ResourceVersion, c.want, err)
		}
	}
}

// The DGD our status write was answered with stands in for a cache behind it: no read
// on the step's path; once the cache shows the write, the copy is dropped.
func TestFreshTakesOurStatusWritesAnswer(t *testing.T) {
	live := &liveReader{rv: "12"}
	r := &Reconciler{APIReader: live}
	key := types.NamespacedName{Namespace: "ns", Name: "g"}
	ours := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, ResourceVersion: "10"},
		Status: v1alpha1.DynamoGraphDeploymentStatus{UpdateRevisionNumber: 2}}
	r.statusRV.Store(key, written{rv: "10", dgd: ours})
	d := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, ResourceVersion: "9"}}
	if err := r.fresh(context.Background(), d); err != nil || live.reads != 0 || d.ResourceVersion != "10" || d.Status.UpdateRevisionNumber != 2 {
		t.Fatalf("a cache behind our write: reads %d, rv %s, revision %d, err %v; want our write's answer, no read", live.reads, d.ResourceVersion, d.Status.UpdateRevisionNumber, err)
	}
	d.Status.UpdateRevisionNumber = 7 // the pass's copy is its own
	if ours.Status.UpdateRevisionNumber != 2 {
		t.Fatal("the kept answer was changed through the pass's DGD")
	}
	caught := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, ResourceVersion: "11"}}
	if err := r.fresh(context.Background(), caught); err != nil || caught.ResourceVersion != "11" {
		t.Fatalf("a cache past our write is used: rv %s, err %v", caught.ResourceVersion, err)
	}
	if v, _ := r.statusRV.Load(key); v.(written).dgd != nil || v.(written).rv != "10" {
		t.Fatalf("kept %+v after the cache showed the write: want the version alone", v)
	}
}

// The cache's update event of the DGD drops the kept answer once it shows our write,
// so a DGD that rests after its last status write keeps no copy; an older event keeps
// it.
func TestSettledDropsTheAnswerOnceTheCacheShowsIt(t *testing.T) {
	r := &Reconciler{}
	key := types.NamespacedName{Namespace: "ns", Name: "g"}
	at := func(rv string) *v1alpha1.DynamoGraphDeployment {
		return &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, ResourceVersion: rv}}
	}
	r.statusRV.Store(key, written{rv: "10", dgd: at("10")})
	r.settled(at("9"))
	if v, _ := r.statusRV.Load(key); v.(written).dgd == nil {
		t.Fatal("an event older than our write dropped the answer")
	}
	r.settled(at("10"))
	if v, _ := r.statusRV.Load(key); v.(written).dgd != nil || v.(written).rv != "10" {
		t.Fatalf("kept %+v once the cache showed our write: want the version alone", v)
	}
	r.settled(at("11")) // nothing kept: nothing to do
}
