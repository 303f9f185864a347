package decide_test

import (
	"flag"
	"fmt"
	"maps"
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

	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/revisions"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/traffic"
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
	// foreign are objects of names the DGD would create that someone else holds.
	foreign map[decide.ObjectName]decide.Holder
	// backends are the backends the operator runs (nil: Deployment alone); names are
	// the names a backend that reads the cluster to name them gave (Snapshot.Names).
	backends map[v1alpha1.BackendType]backends.Description
	names    map[backends.Key]string
	// groups name the PodCliqueSet of a key on a Grove-like backend where it is not
	// groupName's (that name taken by another's PodCliqueSet: backends/grove picks the
	// first free name).
	groups map[backends.Key]string
	// answer answers an analysis query a pass asks (nil: none is expected).
	answer func(decide.Measure) analysis.Result
	// templates are the analysis templates of the DGD's namespace and the cluster
	// (newWorld: tableTemplates).
	templates decide.Templates
	// agent plays the traffic proxy's agents after every pass (agentApplies), with the
	// requests in flight per cohort inflight; ips counts the cluster IPs given out.
	agent    bool
	inflight map[string]int64
	// inflightUnknown: the agents report no requests in flight (a Gateway cannot see
	// them: the drain is then timed, drainSeconds).
	inflightUnknown bool
	ips             int
	// fronts are the cohort frontends a Grove-like backend holds, each in a group of its
	// own per template, by workload name (backends/grove cohort.go).
	fronts map[string]cohortFront
	made   int // cohort frontend groups made so far
}

// cohortFront is one cohort frontend's group on a Grove-like backend: the template it
// runs (its frontend image) and when it was made.
type cohortFront struct {
	template string
	made     int
}

func newWorld(dgd *v1alpha1.DynamoGraphDeployment) *world {
	dgd.Generation = 1
	return &world{dgd: dgd, workloads: map[string]*decide.Workload{}, now: t0,
		objects:  decide.Objects{Named: map[string]client.Object{}},
		backends: map[v1alpha1.BackendType]backends.Description{v1alpha1.BackendDeployment: deployment},
		names:    map[backends.Key]string{}, templates: tableTemplates(), fronts: map[string]cohortFront{}}
}

// describe is the description of the backend of that kind.
func (w *world) describe(kind string) backends.Description {
	for _, b := range w.backends {
		if b.Kind == kind {
			return b
		}
	}
	panic("no backend " + kind)
}

// workloadOf is the workload a backend of that kind creates for key: named by its
// description, or as the world named it (groveLike), in its revision's group when the
// backend holds pools.
func (w *world) workloadOf(kind string, key backends.Key, replicas int32) *decide.Workload {
	b := w.describe(kind)
	wl := &decide.Workload{Backend: kind, Workload: backends.Workload{Key: key, Kind: kind, Replicas: replicas}}
	if b.Names != nil {
		wl.Name = b.Names(w.dgd, key)
	} else {
		wl.Name = w.names[key]
	}
	if b.HoldsPools { // a clique of the revision's PodCliqueSet (backends/grove observe)
		group := groupName(w.dgd.Name, key)
		if g := w.groups[key]; g != "" {
			group = g
		}
		wl.Kind, wl.Group = "PodClique", &backends.ObjectRef{Kind: b.Kind, Name: group}
		if svc := w.dgd.Spec.Services[key.Service]; svc != nil && svc.IsMultinode() {
			wl.Kind = "PodCliqueScalingGroup"
		}
	}
	return wl
}

func (w *world) snapshot() *decide.Snapshot {
	w.outdateFronts() // observed against the spec and status as they are now
	s := &decide.Snapshot{
		DGD: w.dgd.DeepCopy(), Now: w.now,
		Backends:  w.backends,
		Revisions: slices.Clone(w.revisions),
		Names:     maps.Clone(w.names),
		// A copy: writes point into the snapshot's objects, which apply must not move.
		Objects:           decide.Objects{Services: slices.Clone(w.objects.Services), Ingresses: slices.Clone(w.objects.Ingresses), Named: maps.Clone(w.objects.Named)},
		AnalysisTemplates: w.templates,
		Providers:         map[string]traffic.Provider{v1alpha1.TrafficProxy: fakeProxy{}},
		Traffic:           map[string]traffic.Observed{},
	}
	for _, fe := range []string{"Frontend"} {
		s.Traffic[fe] = traffic.Observed{Objects: maps.Clone(w.objects.Named)}
	}
	for _, name := range sortedStrings(w.workloads) {
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
		case decide.RenumberRevision, decide.SetChangeCause, decide.DeleteRevision:
			w.changeRevision(wr)
		case decide.Ensure:
			for _, sw := range wr.Pool.Services {
				if w.describe(wr.Backend).HoldsPools && w.cohortKey(sw.Key) {
					w.ensureFront(wr.Backend, sw)
					continue
				}
				wl := w.workloadOf(wr.Backend, sw.Key, sw.Replicas)
				if _, ok := w.workloads[wl.Name]; !ok {
					w.workloads[wl.Name] = wl
				}
			}
		case decide.CreateObject:
			if svc, ok := wr.Object.(*corev1.Service); ok {
				svc = svc.DeepCopy()
				if svc.Spec.ClusterIP == "" { // the API server gives a virtual IP to all but headless Services
					w.ips++
					svc.Spec.ClusterIP = fmt.Sprintf("10.96.0.%d", w.ips)
				}
				w.objects.Services = append(w.objects.Services, *svc)
			} else {
				w.objects.Named[wr.Kind+"/"+wr.Object.GetName()] = wr.Object.DeepCopyObject().(client.Object)
			}
		case decide.UpdateObject:
			if svc, ok := wr.Object.(*corev1.Service); ok {
				for i := range w.objects.Services {
					if w.objects.Services[i].Name == svc.Name {
						w.objects.Services[i] = *svc.DeepCopy()
					}
				}
			} else if _, ok := w.objects.Named[wr.Kind+"/"+wr.Object.GetName()]; ok {
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
			for name, wl := range w.workloads {
				if name == wr.Workload.Name || wr.Workload.Group != nil && wl.Group != nil && *wl.Group == *wr.Workload.Group {
					delete(w.workloads, name)
				}
			}
		}
	}
	for _, wl := range w.workloads {
		if ready {
			wl.Ready, wl.Updated, wl.Current, wl.Pods = wl.Replicas, wl.Replicas, wl.Replicas, wl.Replicas
		}
	}
	if w.agent {
		w.agentApplies()
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

// edit makes a user's change to the world's graph (a new generation).
func (w *world) edit(change func(*v1alpha1.DynamoGraphDeployment)) {
	change(w.dgd)
	w.dgd.Generation++
}

// step plays one pass: decided, its writes made, pods ready at once when ready.
func (w *world) step(t *testing.T, ready bool) {
	t.Helper()
	_, d := w.decideFor(t)
	w.apply(t, d, ready)
}

// changeRevision makes a revision write other than a create, as revisions.Fake does
// (Renumber, SetChangeCause, Delete), keeping the list sorted by .revision.
func (w *world) changeRevision(wr decide.Write) {
	i := slices.IndexFunc(w.revisions, func(r *appsv1.ControllerRevision) bool { return r.Name == wr.Revision.Name })
	if i < 0 {
		return
	}
	switch wr.Op {
	case decide.RenumberRevision:
		w.revisions[i] = w.revisions[i].DeepCopy()
		w.revisions[i].Revision = wr.Number
	case decide.SetChangeCause:
		w.revisions[i] = w.revisions[i].DeepCopy()
		metav1.SetMetaDataAnnotation(&w.revisions[i].ObjectMeta, v1alpha1.AnnotationChangeCause, wr.Cause)
	case decide.DeleteRevision:
		w.revisions = slices.Delete(w.revisions, i, i+1)
	}
	revisions.SortByRevision(w.revisions)
}

// isStableEnsure reports whether a line of a pass says only that the stable services
// were ensured.
func isStableEnsure(l string) bool {
	return strings.HasPrefix(l, "Ensure ") && (strings.Contains(l, " stable[") || strings.HasSuffix(l, " in place]"))
}

// pass decides one pass (decideFor).
func (w *world) pass(t *testing.T) decide.Decision {
	t.Helper()
	_, d := w.decideFor(t)
	return d
}

// decideFor decides one pass from the world's snapshot, answering the names a backend
// that reads the cluster gives (cliqueName) and the analysis queries (answer; none when
// nil), and fails on any other need. It returns the snapshot with the answers.
func (w *world) decideFor(t *testing.T) (*decide.Snapshot, decide.Decision) {
	t.Helper()
	s := w.snapshot()
	for range 4 {
		d := decide.Decide(s)
		if d.Err != nil {
			t.Fatalf("decision failed: %v", d.Err)
		}
		if len(d.Measure) > 0 && w.answer != nil {
			// The answers to the queries due land before the next pass (the runner
			// queries off the pass): the world decides again with them.
			if s.Measurements == nil {
				s.Measurements = map[decide.Measure]analysis.Result{}
			}
			for _, m := range d.Measure {
				s.Measurements[m.Measure] = w.answer(m.Measure)
			}
			continue
		}
		if !d.Needs.Any() {
			return s, d
		}
		if d.Needs.Unscheduled {
			t.Fatalf("unexpected needs %+v", d.Needs)
		}
		if len(d.Needs.Holders) > 0 {
			w.answerHolders(s, d.Needs.Holders)
		}
		for _, n := range d.Needs.Names {
			w.names[n.Key] = cliqueName(w.dgd.Name, n.Key)
		}
		s.Names = maps.Clone(w.names)
		for _, n := range d.Needs.Names {
			if w.cohortKey(n.Key) { // named by what the cluster holds now: asked every pass
				delete(w.names, n.Key)
				s.Names[n.Key] = w.frontName(n.Key)
			}
		}
	}
	t.Fatalf("needs not met after 4 decisions")
	return nil, decide.Decision{}
}

// groupName and cliqueName name a Grove-like backend's objects as backends/grove does
// (Backend.Name, objectName): the PodCliqueSet of a worker revision {dgd}-{hash} (of
// the stable services {dgd}), each service's clique {pcs}-0-{service}.
func groupName(dgd string, key backends.Key) string {
	if key.Hash == "" {
		return dgd
	}
	return dgd + "-" + key.Hash
}

func cliqueName(dgd string, key backends.Key) string {
	return groupName(dgd, key) + "-0-" + strings.ToLower(key.Service)
}

// cohortClique names the clique of a cohort frontend's n-th template on a Grove-like
// backend, in a PodCliqueSet {dgd}-{service}-{hash}[-n] of its own (backends/grove picks
// the first free {dgd}-k: the world names them apart by what they hold instead).
func cohortClique(dgd string, key backends.Key, n int) string {
	group := dgd + "-" + strings.ToLower(key.Service) + "-" + key.Hash
	if n > 1 {
		group += fmt.Sprintf("-%d", n)
	}
	return group + "-0-" + strings.ToLower(key.Service)
}

// cohortKey reports whether key is a cohort's frontend: a non-worker service at a
// worker revision.
func (w *world) cohortKey(key backends.Key) bool {
	svc := w.dgd.Spec.Services[key.Service]
	return key.Hash != "" && svc != nil && !svc.IsWorker()
}

// frontTemplate is what tells a frontend's templates apart in the world: its image.
func frontTemplate(spec *v1alpha1.DynamoComponentDeploymentSharedSpec) string {
	if spec.ExtraPodSpec == nil || spec.ExtraPodSpec.MainContainer == nil {
		return ""
	}
	return spec.ExtraPodSpec.MainContainer.Image
}

// ensureFront plays backends/grove's Ensure of a cohort frontend: nothing when a
// group of its key runs its template (replicas move only by Scale), else a group of its
// own beside the others, named as Names said (frontName).
func (w *world) ensureFront(kind string, sw backends.ServiceWorkload) {
	if w.runs(sw.Key, frontTemplate(sw.Spec)) != "" {
		return
	}
	b := w.describe(kind)
	name := w.nextFront(sw.Key)
	wl := &decide.Workload{Backend: kind, Workload: backends.Workload{Key: sw.Key, Kind: "PodClique", Name: name, Replicas: sw.Replicas,
		Group: &backends.ObjectRef{Kind: b.Kind, Name: strings.TrimSuffix(name, "-0-"+strings.ToLower(sw.Service))}}}
	w.workloads[name] = wl
	w.made++
	w.fronts[name] = cohortFront{template: frontTemplate(sw.Spec), made: w.made}
}

// runs is the workload of key running template, or "".
func (w *world) runs(key backends.Key, template string) string {
	for name, wl := range w.workloads {
		if f, ok := w.fronts[name]; ok && wl.Key == key && f.template == template {
			return name
		}
	}
	return ""
}

// nextFront is the name of a cohort frontend key's next group.
func (w *world) nextFront(key backends.Key) string {
	for n := 1; ; n++ {
		if name := cohortClique(w.dgd.Name, key, n); w.workloads[name] == nil {
			return name
		}
	}
}

// frontName is backends/grove's Name of a cohort frontend key: the group running the
// spec's template, else the one Ensure makes for it.
func (w *world) frontName(key backends.Key) string {
	if name := w.runs(key, frontTemplate(w.dgd.Spec.Services[key.Service])); name != "" {
		return name
	}
	return w.nextFront(key)
}

// outdateFronts plays backends/grove's Observe of cohort frontends: of a key's groups,
// the one of the spec's template is current and the others are Outdated; when none
// runs it, all of the update revision's are (its Ensure makes the spec's beside them),
// and of an old cohort's the newest is current.
func (w *world) outdateFronts() {
	byKey := map[backends.Key][]string{}
	for name := range w.fronts {
		if wl := w.workloads[name]; wl != nil {
			byKey[wl.Key] = append(byKey[wl.Key], name)
		} else {
			delete(w.fronts, name)
		}
	}
	for key, names := range byKey {
		current := w.runs(key, frontTemplate(w.dgd.Spec.Services[key.Service]))
		if current == "" && key.Hash != w.dgd.Status.UpdateWorkerHash {
			current = names[0]
			for _, n := range names {
				if w.fronts[n].made > w.fronts[current].made {
					current = n
				}
			}
		}
		for _, n := range names {
			w.workloads[n].Outdated = n != current
		}
	}
}

// answerHolders reads what holds each name, as the reconciler does past its cache:
// someone else's object the test put there (world.foreign), else nothing (an object of
// the DGD's own the snapshot shows is never asked for).
func (w *world) answerHolders(s *decide.Snapshot, needs []decide.HolderNeed) {
	if s.Holders == nil {
		s.Holders = map[decide.ObjectName]decide.Holder{}
	}
	for _, n := range needs {
		s.Holders[n.ObjectName] = w.foreign[n.ObjectName]
	}
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
		if quiet(said) {
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
				w.edit(c)
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
	compareGolden(t, filepath.Join("testdata", name+".golden"), strings.Join(got, "\n")+"\n")
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
		w.edit(newImage)
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

// TestDecideMeasure: an analysis step's due measurement is listed (Decision.Measure)
// and the step holds while its result is out, pass after pass under the same key; a
// result filed under another measurement (another attempt, step start or index) is
// not taken; the result of the measurement asked for is recorded at the instant its
// query ran, and the next measurement is asked for under the next index.
func TestDecideMeasure(t *testing.T) {
	w := newWorld(harness.NewDGD("ns", "g").Disagg(2, 2, "img:1").Rollout("1", "0").Obj())
	w.settle(t)
	interval := metav1.Duration{Duration: time.Minute}
	w.dgd.Spec.Rollout.Steps = []v1alpha1.RolloutStep{{Partition: ptr.To(intstr.FromString("50%"))},
		{Analysis: &v1alpha1.RolloutAnalysis{Metrics: []v1alpha1.AnalysisMetric{{Name: "errors", Query: `errors{ns="{{.Canary.Namespace}}"}`,
			SuccessCondition: "result < 0.05", Interval: &interval, Count: ptr.To[int32](2)}}}}}
	newImage(w.dgd)
	w.dgd.Generation++
	var d decide.Decision
	for range 10 {
		if d = w.pass(t); len(d.Measure) > 0 {
			break
		}
		w.apply(t, d, true)
	}
	if len(d.Measure) != 1 {
		t.Fatalf("no measurement due after 10 passes: %+v", d.Measure)
	}
	asked := d.Measure[0]
	if asked.Metric != "errors" || asked.Step != 1 || asked.Index != 0 || asked.Revision != 2 || asked.Attempt != 1 ||
		!strings.HasPrefix(asked.Query, `errors{ns="ns-g-`) || !asked.At.Equal(w.now) {
		t.Fatalf("due %+v", asked)
	}
	if len(d.Measured) != 0 || d.Requeue <= 0 || d.Requeue > decide.MeasureRecheck {
		t.Fatalf("measured %v, requeue %s: want nothing measured and a recheck within %s", d.Measured, d.Requeue, decide.MeasureRecheck)
	}
	w.apply(t, d, true)
	ran := w.now.Add(-time.Second)

	for name, k := range map[string]func(*decide.Measure){
		"another attempt":    func(m *decide.Measure) { m.Attempt++ },
		"another step start": func(m *decide.Measure) { m.Start-- },
		"another index":      func(m *decide.Measure) { m.Index++ },
		"another query":      func(m *decide.Measure) { m.Query += " " },
	} {
		s := w.snapshot()
		stale := asked.Measure
		k(&stale)
		s.Measurements = map[decide.Measure]analysis.Result{stale: {Value: 0.5, Samples: 1, At: ran}}
		d := decide.Decide(s)
		if len(d.Measured) != 0 || len(d.Measure) != 1 || d.Measure[0].Measure != asked.Measure {
			t.Fatalf("%s: measured %v, due %+v: want nothing taken and the same measurement due", name, d.Measured, d.Measure)
		}
	}

	s := w.snapshot()
	s.Measurements = map[decide.Measure]analysis.Result{asked.Measure: {Value: 0.01, Samples: 1, At: ran}}
	d = decide.Decide(s)
	if len(d.Measured) != 1 || d.Measured[0].Measurement.Phase != analysis.Successful || !d.Measured[0].Measurement.At.Equal(ran) {
		t.Fatalf("measured %+v: want one successful measurement at %s", d.Measured, ran)
	}
	if len(d.Measure) != 0 {
		t.Fatalf("due %+v before the interval has passed", d.Measure)
	}
	w.apply(t, d, true)
	w.now = ran.Add(interval.Duration)
	d = w.pass(t)
	if len(d.Measure) != 1 || d.Measure[0].Index != 1 || d.Measure[0].Start != asked.Start {
		t.Fatalf("due %+v: want the second measurement of the same step", d.Measure)
	}
}
