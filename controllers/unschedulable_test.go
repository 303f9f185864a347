package controllers

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/decide"
)

// podReader answers every List of pods with its pods and counts the lists.
type podReader struct {
	client.Reader
	mu    sync.Mutex
	lists int
	opts  client.ListOptions
	pods  []corev1.Pod
}

func (r *podReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lists++
	r.opts = client.ListOptions{}
	r.opts.ApplyOptions(opts)
	time.Sleep(10 * time.Millisecond) // a list takes a while: callers at once must share it
	list.(*corev1.PodList).Items = append([]corev1.Pod(nil), r.pods...)
	return nil
}

func podNamed(name, graph, service string, deleting bool, conds ...corev1.PodCondition) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		v1alpha1.LabelGraph: graph, v1alpha1.LabelService: service, v1alpha1.LabelWorkerHash: "abc"}}}
	if deleting {
		p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	}
	p.Status.Conditions = conds
	return p
}

func TestUnscheduledPodsSharedPerNamespace(t *testing.T) {
	unsched := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/4 nodes are available"}
	r := &podReader{pods: []corev1.Pod{
		podNamed("a", "g1", "decode", false, unsched),
		podNamed("b", "g2", "prefill", false, unsched),
		podNamed("c", "g1", "decode", true, unsched),                                                         // going
		podNamed("d", "g1", "decode", false),                                                                 // not yet considered
		podNamed("e", "g1", "decode", false, corev1.PodCondition{Type: corev1.PodScheduled, Status: "True"}), // placed since
	}}
	var u unscheduledPods
	ctx, now := context.Background(), time.Unix(1000, 0)

	// Eight DGDs of one namespace asking at once make one list.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			pods, err := u.list(ctx, r, "ns", now)
			if err != nil || len(pods) != 2 {
				t.Errorf("list: %v, %v; want the 2 unscheduled pods not being deleted", pods, err)
			}
		})
	}
	wg.Wait()
	if r.lists != 1 {
		t.Fatalf("%d lists for 8 DGDs of one namespace at once, want 1", r.lists)
	}
	if got := r.opts.FieldSelector.String(); got != "spec.nodeName=" {
		t.Errorf("field selector %q, want spec.nodeName=", got)
	}
	if r.opts.Namespace != "ns" || r.opts.Raw == nil || r.opts.Raw.ResourceVersion != "0" {
		t.Errorf("list options %+v: want namespace ns, served from the watch cache (resourceVersion 0)", r.opts)
	}
	if want := (decide.UnscheduledPod{Graph: "g1", Service: "decode", Hash: "abc", Message: "0/4 nodes are available"}); func() bool {
		pods, _ := u.list(ctx, r, "ns", now)
		return pods[0] != want
	}() {
		t.Errorf("first pod is not %+v", want)
	}

	// Within the TTL the answer is shared; another namespace lists on its own; after
	// the TTL (or with a clock gone back) the namespace lists again.
	for _, c := range []struct {
		ns    string
		at    time.Time
		lists int
	}{
		{"ns", now.Add(unscheduledTTL - time.Millisecond), 1},
		{"other", now, 2},
		{"ns", now.Add(unscheduledTTL), 3},
		{"ns", now.Add(unscheduledTTL + time.Second), 3},
		{"ns", now, 4},
	} {
		if _, err := u.list(ctx, r, c.ns, c.at); err != nil || r.lists != c.lists {
			t.Errorf("%s at +%s: %d lists (%v), want %d", c.ns, c.at.Sub(now), r.lists, err, c.lists)
		}
	}
	// A namespace nobody asked about for a while is forgotten when a new one is seen.
	if _, err := u.list(ctx, r, "third", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, ok := u.byNS["other"]; ok {
		t.Error("a namespace unasked for an hour is still remembered")
	}
}
