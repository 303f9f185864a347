package e2e

import (
	"fmt"
	"math"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/harness"
)

// judgeFixture plays a DGD's events into a Watcher's history, out of order across
// objects as informers deliver them.
type judgeFixture struct {
	w   *Watcher
	dgd *v1alpha1.DynamoGraphDeployment
}

func newJudgeFixture() *judgeFixture {
	d := harness.NewDGD("ns", "g").Disagg(4, 2, "vllm:v1").Obj()
	d.UID, d.Generation, d.ResourceVersion = "dgd-uid", 1, "1"
	f := &judgeFixture{w: &Watcher{h: newHistory(), dgd: "g"}, dgd: d}
	f.w.h.record(d.DeepCopy(), false)
	return f
}

func (f *judgeFixture) deployment(service, hash string, replicas int32, rv uint64, gone bool) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "g-" + service + "-" + hash, Namespace: "ns",
		ResourceVersion: fmt.Sprint(rv), UID: types.UID(service + hash),
		Labels:          map[string]string{v1alpha1.LabelService: service, v1alpha1.LabelWorkerHash: hash},
		OwnerReferences: []metav1.OwnerReference{{Kind: "DynamoGraphDeployment", Name: "g", UID: f.dgd.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)}}
	f.w.h.record(dep, gone)
}

// status writes a status reporting workloads "service/hash=replicas" (revision 1 for
// hash a, 2 for b).
func (f *judgeFixture) status(rv uint64, workloads ...string) {
	d := f.dgd.DeepCopy()
	d.ResourceVersion = fmt.Sprint(rv)
	d.Status.ObservedGeneration = 1
	d.Status.Services = map[string]v1alpha1.ServiceStatus{}
	for _, t := range workloads {
		key, n, _ := strings.Cut(t, "=")
		svc, hash, _ := strings.Cut(key, "/")
		st := d.Status.Services[svc]
		st.Workloads = append(st.Workloads, v1alpha1.WorkloadStatus{Name: "g-" + svc + "-" + hash, Revision: map[string]int64{"a": 1, "b": 2}[hash], Replicas: atoi32(n)})
		d.Status.Services[svc] = st
	}
	f.w.h.record(d, false)
}

// settled is revision a at P=4/D=2, its status written at resourceVersion 12.
func (f *judgeFixture) settled() {
	f.deployment("prefill", "a", 4, 11, false)
	f.deployment("decode", "a", 2, 10, false)
	f.status(12, "prefill/a=4", "decode/a=2")
}

func atoi32(s string) int32 {
	var n int32
	_, _ = fmt.Sscan(s, &n)
	return n
}

// TestWatcherJudgesLiveWorkloadsAtStatusWrites: the ratio and orphan rules are judged
// on the live workloads as of each status write, whatever the status says and in
// whatever order the events of different objects arrive; the states between two writes
// of one pass are not (only prefill without decode, which no state may show); a status
// that misreports the live workloads is a violation.
func TestWatcherJudgesLiveWorkloadsAtStatusWrites(t *testing.T) {
	f := newJudgeFixture()
	f.settled()
	// A pass: old prefill 4→3, new decode and prefill created at 1 (decode first).
	f.deployment("prefill", "b", 1, 22, false)
	f.deployment("prefill", "a", 3, 20, false)
	f.deployment("decode", "b", 1, 21, false)
	f.status(23, "prefill/a=3", "decode/a=2", "prefill/b=1", "decode/b=1")
	// A pass that drains the old pool whole (prefill first: decode alone for a moment,
	// which is allowed) and grows the new one.
	f.deployment("prefill", "a", 3, 30, true)
	f.deployment("decode", "a", 2, 31, true)
	f.deployment("decode", "b", 2, 32, false)
	f.deployment("prefill", "b", 4, 33, false)
	f.status(34, "prefill/b=4", "decode/b=2")
	f.w.checkWorkloads(math.MaxUint64)
	f.w.judge(math.MaxUint64)
	if v := f.w.Violations(); len(v) > 0 {
		t.Fatalf("a valid rollout: %q", v)
	}
	if f.w.Stats.PassStates != 3 {
		t.Errorf("judged %d status writes, want 3", f.w.Stats.PassStates)
	}

	// A broken backend: the status reports decode b at 1, prefill b at 1; live, decode b
	// was never scaled up from 0 (created at another count).
	g := newJudgeFixture()
	g.settled()
	g.deployment("decode", "b", 0, 20, false)
	g.deployment("prefill", "b", 1, 21, false)
	g.deployment("prefill", "a", 3, 22, false)
	g.status(23, "prefill/a=3", "decode/a=2", "prefill/b=1", "decode/b=1")
	g.w.checkWorkloads(math.MaxUint64)
	g.w.judge(math.MaxUint64)
	want := []string{
		"orphan prefill: pool b holds prefill=1 and no decode",
		"orphan: pool b holds 1 replicas but none of decode at the status write of resourceVersion 23",
		"status reports g-decode-b at 1, live 0 at the status write of resourceVersion 23",
	}
	got := g.w.Violations()
	if len(got) != len(want) {
		t.Fatalf("got %q, want %d violations starting %q", got, len(want), want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("violation %d: %q, want prefix %q", i, got[i], want[i])
		}
	}
	// The status write before the break is judged on the state of its own moment.
	if spec, _ := g.w.h.changes(12, 23, "dgd-uid"); len(spec) != 3 {
		t.Errorf("changes between the two status writes: %q, want 3", spec)
	}
}

// TestWatcherStopsJudgingAtTheDGDsDeletion: once the DGD is deleted, the garbage
// collector removes its workloads in any order (prefill after decode here): nothing
// after the deletion is judged.
func TestWatcherStopsJudgingAtTheDGDsDeletion(t *testing.T) {
	f := newJudgeFixture()
	f.settled()
	gone := f.dgd.DeepCopy()
	gone.ResourceVersion = "20"
	f.w.h.record(gone, true)
	f.deployment("decode", "a", 2, 21, true)
	f.deployment("prefill", "a", 4, 22, true)
	f.w.checkWorkloads(math.MaxUint64)
	f.w.judge(math.MaxUint64)
	if v := f.w.Violations(); len(v) > 0 {
		t.Fatalf("judged after the DGD's deletion: %q", v)
	}
}
