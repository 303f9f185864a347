package decide_test

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/test/harness"
)

// deployment is the Deployment backend's description (backends/deployment).
var deployment = backends.Description{
	Kind:                "Deployment",
	RemovesUnreadyFirst: true,
	Names: func(dgd *v1alpha1.DynamoGraphDeployment, key backends.Key) string {
		return backends.WorkloadName(dgd.Name, key.Service, key.Hash)
	},
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// world is the cluster as a test plays it for Decide: the DGD, its revisions and its
// workloads, each workload's pods ready as soon as they exist when ready is set.
type world struct {
	dgd       *v1alpha1.DynamoGraphDeployment
	revisions []*appsv1.ControllerRevision
	workloads map[string]*decide.Workload
	objects   decide.Objects
	now       time.Time
}

func newWorld(dgd *v1alpha1.DynamoGraphDeployment) *world {
	dgd.Generation = 1
	return &world{dgd: dgd, workloads: map[string]*decide.Workload{}, now: t0,
		objects: decide.Objects{Named: map[string]client.Object{}}}
}

func (w *world) snapshot() *decide.Snapshot {
	s := &decide.Snapshot{
		DGD: w.dgd.DeepCopy(), Now: w.now,
		Backends:  map[v1alpha1.BackendType]backends.Description{v1alpha1.BackendDeployment: deployment},
		Revisions: w.revisions,
		// A copy: writes point into the snapshot's objects, which apply must not move.
		Objects: decide.Objects{Services: slices.Clone(w.objects.Services), Named: maps.Clone(w.objects.Named)},
	}
	for _, name := range sortedKeys(w.workloads) {
		s.Workloads = append(s.Workloads, *w.workloads[name])
	}
	return s
}

// apply plays a decision's writes on the world (every write succeeds) and writes its
// status; the pods of a created or scaled-up workload are ready at once when ready.
func (w *world) apply(t *testing.T, d decide.Decision, ready bool) []string {
	t.Helper()
	var said []string
	for _, wr := range d.Writes {
		said = append(said, wr.String())
		switch wr.Op {
		case decide.CreateRevision:
			w.revisions = append(w.revisions, wr.Revision.DeepCopy())
		case decide.Ensure:
			for _, sw := range wr.Pool.Services {
				name := deployment.Names(w.dgd, sw.Key)
				if _, ok := w.workloads[name]; !ok {
					w.workloads[name] = &decide.Workload{Backend: "Deployment", Workload: backends.Workload{
						Key: sw.Key, Kind: "Deployment", Name: name, Replicas: sw.Replicas}}
				}
			}
		case decide.CreateObject:
			if svc, ok := wr.Object.(*corev1.Service); ok {
				w.objects.Services = append(w.objects.Services, *svc.DeepCopy())
			} else {
				w.objects.Named[wr.Kind+"/"+wr.Object.GetName()] = wr.Object.DeepCopyObject().(client.Object)
			}
		case decide.DeleteObject:
			w.objects.Services = slices.DeleteFunc(w.objects.Services, func(svc corev1.Service) bool {
				return wr.Kind == "Service" && svc.Name == wr.Object.GetName()
			})
			delete(w.objects.Named, wr.Kind+"/"+wr.Object.GetName())
		case decide.Scale:
			w.workloads[wr.Workload.Name].Replicas = wr.Replicas
		case decide.DeleteWorkload:
			delete(w.workloads, wr.Workload.Name)
		}
	}
	for _, wl := range w.workloads {
		if ready {
			wl.Ready, wl.Updated, wl.Current, wl.Pods = wl.Replicas, wl.Replicas, wl.Replicas, wl.Replicas
		}
	}
	rep := d.Conclude(decide.Outcome{})
	if rep.Status != nil {
		w.dgd.Status = *rep.Status
	}
	for _, e := range rep.Events {
		said = append(said, "Event "+e.Reason+": "+e.Message)
	}
	w.now = w.now.Add(time.Second)
	return said
}

func sortedKeys(m map[string]*decide.Workload) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// pass decides one pass, answering no Needs (none of these graphs has any).
func (w *world) pass(t *testing.T) decide.Decision {
	t.Helper()
	d := decide.Decide(w.snapshot())
	if d.Needs.Any() {
		t.Fatalf("unexpected needs %+v", d.Needs)
	}
	if d.Err != nil {
		t.Fatalf("decision failed: %v", d.Err)
	}
	return d
}

func condition(st v1alpha1.DynamoGraphDeploymentStatus, typ string) string {
	c := meta.FindStatusCondition(st.Conditions, typ)
	if c == nil {
		return "absent"
	}
	return fmt.Sprintf("%s/%s", c.Status, c.Reason)
}

// settle runs passes until one writes nothing but the stable services' Ensure and says
// nothing, and returns what each pass wrote and said, passes separated by "--".
func (w *world) settle(t *testing.T) []string {
	t.Helper()
	var out []string
	for range 30 {
		said := w.apply(t, w.pass(t), true)
		quiet := true
		for _, l := range said {
			if !strings.HasPrefix(l, "Ensure Deployment stable[") {
				quiet = false
			}
		}
		if quiet {
			return out
		}
		out = append(append(out, said...), "--")
	}
	t.Fatalf("no settled state after 30 passes: %s", strings.Join(out, "\n"))
	return nil
}

// summary is the status a test checks: Ready, the rollout's phase and reason, the
// revisions.
func summary(st v1alpha1.DynamoGraphDeploymentStatus) string {
	ru := st.RollingUpdate
	if ru == nil {
		ru = &v1alpha1.RollingUpdateStatus{}
	}
	return fmt.Sprintf("Ready %s; rollout %s/%s; current %s, update #%d %s",
		condition(st, v1alpha1.ConditionReady), ru.Phase, ru.Reason,
		st.CurrentRevision, st.UpdateRevisionNumber, st.UpdateRevision)
}

// update rewrites the golden files of TestDecideGolden from what Decide does now.
var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// change is one change a user makes between two settled states.
type change func(*v1alpha1.DynamoGraphDeployment)

func newImage(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "img:2") }

func partition(p string) change {
	return func(d *v1alpha1.DynamoGraphDeployment) {
		v := intstr.Parse(p)
		d.Spec.Rollout.Partition = &v
	}
}

func annotate(key, value string) change {
	return func(d *v1alpha1.DynamoGraphDeployment) {
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[key] = value
	}
}

func both(cs ...change) change {
	return func(d *v1alpha1.DynamoGraphDeployment) {
		for _, c := range cs {
			c(d)
		}
	}
}

// TestDecideGolden plays graphs on Deployments through Decide, pass after pass, in a
// world where every write succeeds and pods are ready at once: what each pass writes
// and says, and the status it settles in, after a first deploy and each change. The
// transcripts are testdata/<case>.golden (go test -run TestDecideGolden -update).
func TestDecideGolden(t *testing.T) {
	disagg := func() *harness.DGD { return harness.NewDGD("ns", "g").Disagg(2, 2, "img:1").Rollout("1", "0") }
	pauseStep := []v1alpha1.RolloutStep{{Partition: ptr.To(intstr.FromString("50%"))}, {Pause: &v1alpha1.RolloutPause{}}}
	cases := map[string]struct {
		dgd     *v1alpha1.DynamoGraphDeployment
		changes []change
	}{
		"first-deploy":       {dgd: disagg().Obj()},
		"rolling-update":     {dgd: disagg().Obj(), changes: []change{newImage}},
		"rolling-surge-2":    {dgd: harness.NewDGD("ns", "g").Disagg(4, 4, "img:1").Rollout("2", "1").Obj(), changes: []change{newImage}},
		"partition":          {dgd: disagg().Obj(), changes: []change{both(newImage, partition("50%")), partition("0")}},
		"recreate":           {dgd: disagg().Strategy(v1alpha1.RecreateStrategy).Obj(), changes: []change{newImage}},
		"scale-only":         {dgd: disagg().Obj(), changes: []change{func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Services["decode"].Replicas = ptr.To[int32](3) }}},
		"abort-at-partition": {dgd: disagg().Obj(), changes: []change{both(newImage, partition("50%")), annotate(v1alpha1.AnnotationAbort, "2/1"), annotate(v1alpha1.AnnotationRetry, "2/1")}},
		"steps-pause-promote": {dgd: disagg().Obj(), changes: []change{
			both(newImage, func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Steps = pauseStep }),
			annotate(v1alpha1.AnnotationPromote, "2/2")}},
		"invalid-budget": {dgd: disagg().Obj(), changes: []change{func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["decode"].Annotations = map[string]string{v1alpha1.AnnotationMaxSurge: "lots"}
		}}},
		"frontend-image": {dgd: disagg().Obj(), changes: []change{func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = "frontend:2"
		}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(tc.dgd)
			got := append(w.settle(t), summary(w.dgd.Status))
			for _, c := range tc.changes {
				c(w.dgd)
				w.dgd.Generation++
				got = append(append(got, "== change"), w.settle(t)...)
				got = append(got, summary(w.dgd.Status))
			}
			golden(t, name, got)
		})
	}
}

// golden compares a transcript with testdata/<name>.golden, or rewrites it under -update.
func golden(t *testing.T, name string, got []string) {
	t.Helper()
	file := filepath.Join("testdata", name+".golden")
	text := strings.Join(got, "\n") + "\n"
	if *update {
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if diff := cmp.Diff(string(want), text); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", file, diff)
	}
}

// TestDecideStale: a pass whose cache does not show the operator's last write yet
// decides nothing, not even the status.
func TestDecideStale(t *testing.T) {
	w := newWorld(harness.NewDGD("ns", "g").Disagg(2, 2, "img:1").Obj())
	s := w.snapshot()
	s.Stale = "g-decode-6101c065"
	d := decide.Decide(s)
	if d.Wait != "g-decode-6101c065" || len(d.Writes) != 0 || d.Status != nil || len(d.Events) != 0 {
		t.Fatalf("decision %+v, want a wait for g-decode-6101c065 and nothing else", d)
	}
}

// TestDecideRecreateAnnounce: under Recreate, the pass that first takes the running
// revision's pods away announces Ready False (Recreating) before any of its workload
// writes, once; the next pass, reading Ready False, announces nothing; and a DGD read
// with Ready already False is not announced at all.
func TestDecideRecreateAnnounce(t *testing.T) {
	for _, readyBefore := range []bool{true, false} {
		w := newWorld(harness.NewDGD("ns", "g").Disagg(2, 2, "img:1").Rollout("1", "0").Strategy(v1alpha1.RecreateStrategy).Obj())
		w.settle(t)
		if !readyBefore {
			meta.SetStatusCondition(&w.dgd.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady,
				Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonReplicasNotReady})
		}
		newImage(w.dgd)
		w.dgd.Generation++
		d := w.pass(t)
		var ops []decide.Op
		var announced *v1alpha1.DynamoGraphDeploymentStatus
		for _, wr := range d.Writes {
			if wr.Op == decide.AnnounceStatus || wr.Op == decide.Scale || wr.Op == decide.DeleteWorkload {
				ops = append(ops, wr.Op)
			}
			if wr.Op == decide.AnnounceStatus {
				announced = wr.Status
			}
		}
		want := []decide.Op{decide.AnnounceStatus, decide.Scale, decide.Scale}
		if !readyBefore {
			want = want[1:]
		}
		if !slices.Equal(ops, want) {
			t.Fatalf("ready before %v: writes %v, want %v", readyBefore, ops, want)
		}
		if announced != nil {
			c := meta.FindStatusCondition(announced.Conditions, v1alpha1.ConditionReady)
			if c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonRecreating ||
				c.Message != "Recreate: revision 1 is taken down before revision 2 starts" || c.ObservedGeneration != w.dgd.Generation {
				t.Errorf("announced Ready %+v", c)
			}
		}
		if got := condition(*d.Status, v1alpha1.ConditionReady); got != "False/"+v1alpha1.ReasonReplicasNotReady {
			t.Errorf("ready before %v: the pass's status has Ready %s, want False/%s", readyBefore, got, v1alpha1.ReasonReplicasNotReady)
		}
		w.apply(t, d, true)
		for _, wr := range w.pass(t).Writes {
			if wr.Op == decide.AnnounceStatus {
				t.Errorf("ready before %v: the next pass announces again", readyBefore)
			}
		}
	}
}
