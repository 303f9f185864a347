//go:build linux

package crash

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/revisions"
	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/e2e"
	"github.com/dgd-rollout/operator/test/harness"
)

// rolloutTimeout bounds one rollout (or hold) under kills.
const rolloutTimeout = 2 * time.Minute

// settleTimeout bounds the garbage collection of drained workloads after completion.
const settleTimeout = 30 * time.Second

// scenario is one DGD in its own namespace under the invariant watcher.
type scenario struct {
	t        *testing.T
	e        *env
	ns, name string
	uid      types.UID
	w        *e2e.Watcher
	// want is the worker hash of the spec last written; hashes holds the hash of every
	// worker template this scenario ever wrote (each must have exactly one revision).
	want   string
	hashes map[string]bool
	// order is every distinct worker template in the order written: under a
	// spec.revisionHistoryLimit the history keeps the newest limit+1 of them.
	order []string
	hooks hooks
	// oneSided measures pools seen (by the 200 ms polls) holding replicas of some worker
	// services and none of another: the state between two writes of one pass, which a
	// kill can leave behind until the next operator finishes the pass. The watcher fails
	// the test on the ones no state may show (prefill without decode, at any write) and
	// on any at a pass boundary; the rest (decode alone, prefill drained first) are
	// logged.
	oneSided oneSidedStats
	flushed  time.Time // when until last flushed the watcher
}

type oneSidedStats struct {
	samples, polls int
	since          time.Time // start of the current one-sided stretch, or zero
	longest        time.Duration
	example        string
}

// hooks connect a scenario to what runs the operator.
type hooks struct {
	// watching is called once the watcher runs, before the DGD is created.
	watching func(*scenario)
	// changed is called after every spec write (the chaos monkey's kill trigger).
	changed func()
	// describe adds context (the operator's state) to failure messages.
	describe func() string
}

// newScenario creates a namespace, starts the watcher (before the DGD, so it sees every
// event), creates the DGD with one GPU per worker and waits for revision 1 to roll out.
func newScenario(t *testing.T, e *env, obj *v1alpha1.DynamoGraphDeployment, h hooks) *scenario {
	t.Helper()
	ctx := context.Background()
	if err := e.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: obj.Namespace}}); err != nil {
		t.Fatalf("creating namespace %s: %v", obj.Namespace, err)
	}
	w, err := e2e.Watch(ctx, e.cl.Config, obj.Namespace, obj.Name)
	if err != nil {
		t.Fatalf("starting the invariant watcher: %v", err)
	}
	s := &scenario{t: t, e: e, ns: obj.Namespace, name: obj.Name, w: w, hashes: map[string]bool{}, hooks: h}
	t.Cleanup(func() {
		// Everything the watcher saw after the test's last wait is judged too.
		if err := w.Flush(context.Background()); err != nil {
			t.Error(err)
		}
		if v := w.Violations(); len(v) > 0 {
			t.Errorf("%s/%s: invariant violations: %s", s.ns, s.name, strings.Join(v, "; "))
		}
		w.Stop()
		st := w.Snapshot()
		t.Logf("%s/%s watcher: %d events, %d pass states, peak pods %v, min ready %v, max skew %.3f",
			s.ns, s.name, st.Events, st.PassStates, st.PeakPods, st.MinReady, st.MaxSkew)
		if o := s.oneSided; o.samples > 0 {
			t.Logf("%s/%s: %d of %d polls saw a one-sided pool on the live workloads (longest stretch %s: %s)",
				s.ns, s.name, o.samples, o.polls, o.longest.Round(time.Millisecond), o.example)
		}
	})
	if h.watching != nil {
		h.watching(s)
	}
	for _, name := range obj.WorkerServiceNames() {
		obj.Spec.Services[name].Resources = &v1alpha1.Resources{Limits: &v1alpha1.ResourceItem{GPU: "1"}}
	}
	if err := e.k8s.Create(ctx, obj); err != nil {
		t.Fatalf("creating DGD %s/%s: %v", s.ns, s.name, err)
	}
	s.uid = obj.UID
	s.record(obj)
	s.converge("revision 1")
	return s
}

// record remembers the worker hash of a spec as the API server stored it (defaults
// applied), computed as the operator does.
func (s *scenario) record(d *v1alpha1.DynamoGraphDeployment) {
	s.want = revisions.Hash(revisions.NewWorkerTemplate(d), ptr.To(ptr.Deref(d.Status.CollisionCount, 0)))
	if !s.hashes[s.want] {
		s.order = append(s.order, s.want)
	}
	s.hashes[s.want] = true
	if s.hooks.changed != nil {
		s.hooks.changed()
	}
}

func (s *scenario) dgd() (*v1alpha1.DynamoGraphDeployment, error) {
	var d v1alpha1.DynamoGraphDeployment
	err := s.e.k8s.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: s.name}, &d)
	return &d, err
}

// update changes the spec (retrying on conflicts with the operator's status writes).
func (s *scenario) update(what string, change func(*v1alpha1.DynamoGraphDeployment)) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := s.dgd()
		if err == nil {
			change(d)
			if err = s.e.k8s.Update(context.Background(), d); err == nil {
				s.t.Logf("%s/%s: %s (generation %d, worker hash %s)", s.ns, s.name, what, d.Generation,
					revisions.Hash(revisions.NewWorkerTemplate(d), ptr.To(ptr.Deref(d.Status.CollisionCount, 0))))
				s.record(d)
				return
			}
		}
		if !apierrors.IsConflict(err) || time.Now().After(deadline) {
			s.t.Fatalf("%s/%s: %s: %v", s.ns, s.name, what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// undo writes back the worker templates of revision number (kubectl dgd rollout undo
// --to-revision=number).
func (s *scenario) undo(what string, number int64) {
	s.t.Helper()
	var revs appsv1.ControllerRevisionList
	if err := s.e.k8s.List(context.Background(), &revs, client.InNamespace(s.ns)); err != nil {
		s.t.Fatal(err)
	}
	var rev *appsv1.ControllerRevision
	for i := range revs.Items {
		if revs.Items[i].Revision == number {
			rev = &revs.Items[i]
		}
	}
	if rev == nil {
		s.t.Fatalf("%s/%s: no ControllerRevision numbered %d", s.ns, s.name, number)
	}
	before := len(s.hashes)
	s.update(fmt.Sprintf("%s (%s)", what, rev.Name), func(d *v1alpha1.DynamoGraphDeployment) {
		spec, err := revisions.Restore(d, rev)
		if err != nil {
			s.t.Fatal(err)
		}
		d.Spec = *spec
	})
	if len(s.hashes) != before || s.want != revisions.HashOf(rev) {
		s.t.Fatalf("%s/%s: undo to %s wrote template %s, not the revision's", s.ns, s.name, rev.Name, s.want)
	}
}

// world is one read of everything a DGD owns, workloads first and revisions last
// (a revision is created before its workloads, so a read in this order never sees a
// workload whose revision is not yet written). Single-node workers are Deployments
// (with ReplicaSets), multinode workers LeaderWorkerSets (with StatefulSets: one for
// the leaders, owned by the LeaderWorkerSet, and one per group for the workers, owned
// by the group's leader pod).
type world struct {
	d    *v1alpha1.DynamoGraphDeployment
	deps []appsv1.Deployment
	lwss []lwsv1.LeaderWorkerSet
	rss  []appsv1.ReplicaSet
	stss []appsv1.StatefulSet
	pods []corev1.Pod
	revs []appsv1.ControllerRevision
}

func (s *scenario) read() (*world, error) {
	ctx, in := context.Background(), client.InNamespace(s.ns)
	var (
		w    world
		err  error
		deps appsv1.DeploymentList
		lwss lwsv1.LeaderWorkerSetList
		rss  appsv1.ReplicaSetList
		stss appsv1.StatefulSetList
		pods corev1.PodList
		revs appsv1.ControllerRevisionList
	)
	if w.d, err = s.dgd(); err != nil {
		return nil, err
	}
	if err := s.e.k8s.List(ctx, &deps, in); err != nil {
		return nil, err
	}
	if err := s.e.k8s.List(ctx, &lwss, in); err != nil {
		return nil, err
	}
	if err := s.e.k8s.List(ctx, &rss, in); err != nil {
		return nil, err
	}
	if err := s.e.k8s.List(ctx, &stss, in); err != nil {
		return nil, err
	}
	if err := s.e.k8s.List(ctx, &pods, in); err != nil {
		return nil, err
	}
	if err := s.e.k8s.List(ctx, &revs, in); err != nil {
		return nil, err
	}
	w.deps, w.lwss, w.rss, w.stss, w.pods = deps.Items, lwss.Items, rss.Items, stss.Items, pods.Items
	for _, r := range revs.Items {
		// LeaderWorkerSets and StatefulSets keep their own template history in
		// ControllerRevisions they control (a StatefulSet's carry its pod labels, ours).
		if ref := metav1.GetControllerOf(&r); ref == nil || ref.Kind == "DynamoGraphDeployment" {
			w.revs = append(w.revs, r)
		}
	}
	return &w, nil
}

// ownershipProblems checks what must hold at every instant, mid-rollout and across
// operator crashes: every Deployment, LeaderWorkerSet, ReplicaSet, StatefulSet and pod
// in the namespace belongs to the DGD and (for workers) to a revision the DGD has
// recorded; every
// ControllerRevision is controlled by the DGD, records one of the templates this
// scenario wrote, and no two record the same template or carry the same hash or number.
func (s *scenario) ownershipProblems(w *world) []string {
	var out []string
	revHash := map[string]string{} // hash label -> revision name
	revNumber := map[int64]string{}
	template := map[string]string{} // hash of the recorded template (collision count 0) -> name
	for i := range w.revs {
		r := &w.revs[i]
		h := r.Labels[v1alpha1.LabelWorkerHash]
		if r.Labels[v1alpha1.LabelGraph] != s.name {
			out = append(out, fmt.Sprintf("ControllerRevision %s is not labelled with DGD %s", r.Name, s.name))
		}
		if ref := metav1.GetControllerOf(r); ref == nil || ref.UID != s.uid {
			out = append(out, fmt.Sprintf("ControllerRevision %s is not controlled by DGD %s (%v)", r.Name, s.name, ref))
		}
		if other, dup := revHash[h]; dup {
			out = append(out, fmt.Sprintf("ControllerRevisions %s and %s carry the same hash %q", other, r.Name, h))
		}
		revHash[h] = r.Name
		if other, dup := revNumber[r.Revision]; dup {
			out = append(out, fmt.Sprintf("ControllerRevisions %s and %s have the same revision number %d", other, r.Name, r.Revision))
		}
		revNumber[r.Revision] = r.Name
		if !s.hashes[h] {
			out = append(out, fmt.Sprintf("ControllerRevision %s records a template (hash %s) this test never wrote", r.Name, h))
		}
		data, err := revisions.DecodeRevisionData(r)
		if err != nil {
			out = append(out, err.Error())
			continue
		}
		cc := ptr.To(ptr.Deref(w.d.Status.CollisionCount, 0)) // the status may not be written yet
		if want := revisions.RevisionName(s.name, revisions.GraphHash(data.Graph(), cc)); r.Name != want {
			out = append(out, fmt.Sprintf("ControllerRevision %s is not named after the hash of its graph template (%s)", r.Name, want))
		}
		if want := revisions.Hash(data.Template(), cc); h != want {
			out = append(out, fmt.Sprintf("ControllerRevision %s carries worker hash %q, its template's is %q", r.Name, h, want))
		}
		th := revisions.Hash(data.Template(), ptr.To[int32](0))
		if other, dup := template[th]; dup {
			out = append(out, fmt.Sprintf("ControllerRevisions %s and %s record the same worker template", other, r.Name))
		}
		template[th] = r.Name
	}
	belongs := func(kind string, o metav1.Object, ownerUID types.UID, ownerKinds ...string) {
		if o.GetLabels()[v1alpha1.LabelGraph] != s.name {
			out = append(out, fmt.Sprintf("%s %s does not belong to DGD %s (labels %v)", kind, o.GetName(), s.name, o.GetLabels()))
			return
		}
		ref := metav1.GetControllerOf(o)
		if ref == nil || !slices.Contains(ownerKinds, ref.Kind) || (ownerUID != "" && ref.UID != ownerUID) {
			out = append(out, fmt.Sprintf("%s %s has controller %v, want a %s", kind, o.GetName(), ref, strings.Join(ownerKinds, " or ")))
		}
		if h := o.GetLabels()[v1alpha1.LabelWorkerHash]; h != "" && revHash[h] == "" {
			out = append(out, fmt.Sprintf("%s %s is of worker revision %s, which has no ControllerRevision (orphaned)", kind, o.GetName(), h))
		}
	}
	for i := range w.deps {
		belongs("Deployment", &w.deps[i], s.uid, "DynamoGraphDeployment")
	}
	for i := range w.lwss {
		belongs("LeaderWorkerSet", &w.lwss[i], s.uid, "DynamoGraphDeployment")
	}
	for i := range w.rss {
		belongs("ReplicaSet", &w.rss[i], "", "Deployment")
	}
	for i := range w.stss {
		// LWS labels its StatefulSets with its own labels, not the pod template's.
		if ref := metav1.GetControllerOf(&w.stss[i]); ref == nil || (ref.Kind != "LeaderWorkerSet" && ref.Kind != "Pod") {
			out = append(out, fmt.Sprintf("StatefulSet %s has controller %v, want a LeaderWorkerSet or a leader Pod", w.stss[i].Name, ref))
		}
	}
	for i := range w.pods {
		belongs("Pod", &w.pods[i], "", "ReplicaSet", "StatefulSet")
	}
	return out
}

// settledProblems checks a completed rollout once garbage collection is done: only the
// update revision's worker workloads (Deployments, or LeaderWorkerSets for multinode
// services) and the stable ones exist, at their desired replicas; every ReplicaSet,
// StatefulSet and pod hangs off them; exactly one ControllerRevision per template
// ever written, the update revision newest, and current = update.
func (s *scenario) settledProblems(w *world) []string {
	d := w.d
	var out []string
	want := map[string]int32{} // "Kind name" -> desired replicas
	for _, name := range d.ServiceNames() {
		svc := d.Spec.Services[name]
		hash, kind := "", "Deployment"
		if svc.IsWorker() {
			hash = s.want
		}
		if svc.IsMultinode() {
			kind = "LeaderWorkerSet"
		}
		want[kind+" "+backends.WorkloadName(d.Name, name, hash)] = svc.DesiredReplicas()
	}
	owner := map[types.UID]string{} // every live object a ReplicaSet, StatefulSet or pod may hang off
	check := func(kind string, o metav1.Object, replicas int32) {
		key := kind + " " + o.GetName()
		r, ok := want[key]
		switch {
		case !ok:
			out = append(out, key+" is left after the rollout")
		case replicas != r:
			out = append(out, fmt.Sprintf("%s has %d replicas, want %d", key, replicas, r))
		}
		delete(want, key)
		owner[o.GetUID()] = key
	}
	for i := range w.deps {
		check("Deployment", &w.deps[i], ptr.Deref(w.deps[i].Spec.Replicas, 1))
	}
	for i := range w.lwss {
		check("LeaderWorkerSet", &w.lwss[i], ptr.Deref(w.lwss[i].Spec.Replicas, 1))
	}
	for name := range want {
		out = append(out, name+" is missing")
	}
	hangs := func(kind string, o metav1.Object) {
		if ref := metav1.GetControllerOf(o); ref == nil || owner[ref.UID] == "" {
			out = append(out, fmt.Sprintf("%s %s is orphaned (controller %v)", kind, o.GetName(), ref))
			return
		}
		owner[o.GetUID()] = kind + " " + o.GetName()
	}
	for i := range w.rss {
		hangs("ReplicaSet", &w.rss[i])
	}
	// Leader pods own their group's worker StatefulSet: leader StatefulSets, then
	// leader pods, then worker StatefulSets, then the rest of the pods.
	leader := func(p *corev1.Pod) bool { return p.Labels[lwsv1.WorkerIndexLabelKey] == "0" }
	for i := range w.stss {
		if ref := metav1.GetControllerOf(&w.stss[i]); ref != nil && ref.Kind == "LeaderWorkerSet" {
			hangs("StatefulSet", &w.stss[i])
		}
	}
	for i := range w.pods {
		if leader(&w.pods[i]) {
			hangs("pod", &w.pods[i])
		}
	}
	for i := range w.stss {
		if ref := metav1.GetControllerOf(&w.stss[i]); ref == nil || ref.Kind != "LeaderWorkerSet" {
			hangs("StatefulSet", &w.stss[i])
		}
	}
	for _, p := range w.pods {
		if !leader(&p) {
			hangs("pod", &p)
		}
		if !p.DeletionTimestamp.IsZero() {
			out = append(out, fmt.Sprintf("pod %s is still terminating", p.Name))
		}
	}
	got := map[string]bool{}
	var newest *appsv1.ControllerRevision
	for i := range w.revs {
		r := &w.revs[i]
		got[r.Labels[v1alpha1.LabelWorkerHash]] = true
		if newest == nil || r.Revision > newest.Revision {
			newest = r
		}
	}
	kept := s.kept(d)
	for _, h := range kept {
		if !got[h] {
			out = append(out, fmt.Sprintf("no ControllerRevision records template %s", h))
		}
	}
	if len(w.revs) != len(kept) {
		out = append(out, fmt.Sprintf("%d ControllerRevisions for the %d distinct worker templates the history keeps", len(w.revs), len(kept)))
	}
	if newest == nil || newest.Labels[v1alpha1.LabelWorkerHash] != s.want {
		out = append(out, fmt.Sprintf("the newest ControllerRevision is %v, not the update revision %s", revName(newest), s.want))
	}
	if d.Status.CurrentRevision != d.Status.UpdateRevision {
		out = append(out, fmt.Sprintf("status.currentRevision %s != status.updateRevision %s after the rollout", d.Status.CurrentRevision, d.Status.UpdateRevision))
	}
	// The status has seen the world settle: once the old revision's workloads are
	// deleted, a worker service runs in the update revision's Dynamo namespace only.
	for _, name := range d.WorkerServiceNames() {
		ns := []string{backends.EffectiveNamespace(d, true, s.want)}
		if got := d.Status.Services[name].RuntimeNamespaces; !slices.Equal(got, ns) {
			out = append(out, fmt.Sprintf("status.services.%s.runtimeNamespaces is %v, want %v", name, got, ns))
		}
	}
	return out
}

// kept is the templates a settled history records: every one written, or under
// spec.revisionHistoryLimit the update revision's and the limit newest before it (each
// template is written once here, so the order written is the order of revision
// numbers).
func (s *scenario) kept(d *v1alpha1.DynamoGraphDeployment) []string {
	if d.Spec.RevisionHistoryLimit == nil {
		return s.order
	}
	return s.order[max(0, len(s.order)-int(*d.Spec.RevisionHistoryLimit)-1):]
}

func revName(r *appsv1.ControllerRevision) string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("%s (revision %d)", r.Name, r.Revision)
}

// until polls every 200 ms until cond holds of one read, failing at the first
// invariant violation, ownership problem or after timeout.
func (s *scenario) until(what string, timeout time.Duration, cond func(*world) bool) *world {
	s.t.Helper()
	begin := time.Now()
	var last *world
	var lastErr error
	for {
		if time.Since(s.flushed) > time.Second {
			// The watcher judges the workloads' states once every event up to them arrived.
			if err := s.w.Flush(context.Background()); err != nil {
				s.t.Fatal(err)
			}
			s.flushed = time.Now()
		}
		if v := s.w.Violations(); len(v) > 0 {
			s.t.Fatalf("%s/%s: invariant violated while waiting for %s: %s\n%s", s.ns, s.name, what, strings.Join(v, "; "), s.context(last))
		}
		w, err := s.read()
		if err == nil {
			last = w
			if p := s.ownershipProblems(w); len(p) > 0 {
				s.t.Fatalf("%s/%s: while waiting for %s:\n  %s\n%s", s.ns, s.name, what, strings.Join(p, "\n  "), s.context(w))
			}
			s.sampleOneSided(w)
			if cond(w) {
				s.t.Logf("%s/%s: %s after %s", s.ns, s.name, what, time.Since(begin).Round(10*time.Millisecond))
				if err := s.w.Flush(context.Background()); err != nil {
					s.t.Fatal(err)
				}
				if v := s.w.Violations(); len(v) > 0 {
					s.t.Fatalf("%s/%s: invariant violated by %s: %s\n%s", s.ns, s.name, what, strings.Join(v, "; "), s.context(w))
				}
				return w
			}
		} else {
			lastErr = err
		}
		if time.Since(begin) > timeout {
			s.t.Fatalf("%s/%s: no %s within %s (last read error %v)\n%s", s.ns, s.name, what, timeout, lastErr, s.context(last))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sampleOneSided records whether some worker revision's workloads hold replicas of
// one worker service and none of another at this poll (ROLLOUT.md's orphan
// prevention, which the watcher checks on the live workloads at every pass boundary,
// and in the prefill-without-decode direction at every write).
func (s *scenario) sampleOneSided(w *world) {
	found := oneSided(w)
	o := &s.oneSided
	o.polls++
	if found == "" {
		o.since = time.Time{}
		return
	}
	o.samples++
	if o.since.IsZero() {
		o.since = time.Now()
	}
	if d := time.Since(o.since); d >= o.longest {
		o.longest = d
		o.example = found
	}
}

// oneSided describes a worker revision whose live workloads (Deployments, LeaderWorkerSets) hold replicas of some
// worker services and none of another, or returns "".
func oneSided(w *world) string {
	workers := w.d.WorkerServiceNames()
	spec := map[string]map[string]int32{} // hash -> service -> replicas
	add := func(o metav1.Object, replicas *int32) {
		h := o.GetLabels()[v1alpha1.LabelWorkerHash]
		if h == "" || !o.GetDeletionTimestamp().IsZero() {
			return
		}
		if spec[h] == nil {
			spec[h] = map[string]int32{}
		}
		spec[h][o.GetLabels()[v1alpha1.LabelService]] += ptr.Deref(replicas, 1)
	}
	for i := range w.deps {
		add(&w.deps[i], w.deps[i].Spec.Replicas)
	}
	for i := range w.lwss {
		add(&w.lwss[i], w.lwss[i].Spec.Replicas)
	}
	found := ""
	for h, bySvc := range spec {
		var with, without []string
		for _, name := range workers {
			if w.d.Spec.Services[name].DesiredReplicas() == 0 {
				continue
			}
			if bySvc[name] > 0 {
				with = append(with, name)
			} else {
				without = append(without, name)
			}
		}
		if len(with) > 0 && len(without) > 0 {
			ready := map[string]int{}
			for i := range w.pods {
				p := &w.pods[i]
				if p.Labels[v1alpha1.LabelWorkerHash] == h && p.DeletionTimestamp.IsZero() && cluster.PodReady(p) {
					ready[p.Labels[v1alpha1.LabelService]]++
				}
			}
			found = fmt.Sprintf("revision %s: %v set, %v none (replicas %v, ready pods %v)", h, with, without, bySvc, ready)
		}
	}
	return found
}

// converge waits until the spec last written is rolled out (phase Completed for this
// generation, every pod ready on the update revision), then until garbage collection
// leaves only what the update revision needs.
func (s *scenario) converge(what string) {
	s.t.Helper()
	s.until(what+" rolled out", rolloutTimeout, func(w *world) bool {
		return e2e.UpdateHash(w.d) == s.want && e2e.RolledOut(w.d, w.pods)
	})
	var problems []string
	s.until(what+" settled", settleTimeout, func(w *world) bool {
		problems = s.settledProblems(w)
		return len(problems) == 0 && e2e.UpdateHash(w.d) == s.want && e2e.RolledOut(w.d, w.pods)
	})
}

// holdPartition waits until the rollout holds at the partition: phase Paused (reason
// Partitioned) for this generation, old[svc] ready pods on the previous revision and
// the rest on the update revision, nothing else.
func (s *scenario) holdPartition(what string, old map[string]int) {
	s.t.Helper()
	s.until(what, rolloutTimeout, func(w *world) bool {
		d := w.d
		ru := d.Status.RollingUpdate
		if ru == nil || ru.Phase != v1alpha1.RolloutPaused || ru.Reason != "Partitioned" ||
			d.Status.ObservedGeneration != d.Generation || e2e.UpdateHash(d) != s.want {
			return false
		}
		onNew, onOld := map[string]int{}, map[string]int{}
		oldHashes := map[string]bool{}
		for i := range w.pods {
			p := &w.pods[i]
			svc, h := p.Labels[v1alpha1.LabelService], p.Labels[v1alpha1.LabelWorkerHash]
			if h == "" {
				continue
			}
			if !p.DeletionTimestamp.IsZero() || !cluster.PodReady(p) {
				return false
			}
			if h == s.want {
				onNew[svc]++
			} else {
				onOld[svc]++
				oldHashes[h] = true
			}
		}
		if len(oldHashes) != 1 {
			return false
		}
		for _, name := range d.WorkerServiceNames() {
			r := int(d.Spec.Services[name].DesiredReplicas())
			if onOld[name] != old[name] || onNew[name] != r-old[name] {
				return false
			}
		}
		return true
	})
}

// context describes the last read and the operator for failure messages.
func (s *scenario) context(w *world) string {
	var b strings.Builder
	if w != nil {
		fmt.Fprintf(&b, "  status: %s\n", e2e.Summary(w.d))
		names := make([]string, 0, len(w.deps))
		for _, d := range w.deps {
			names = append(names, fmt.Sprintf("%s=%d/%d", d.Name, d.Status.AvailableReplicas, ptr.Deref(d.Spec.Replicas, 1)))
		}
		sort.Strings(names)
		fmt.Fprintf(&b, "  deployments: %s\n", strings.Join(names, " "))
		names = names[:0]
		for _, l := range w.lwss {
			names = append(names, fmt.Sprintf("%s=%d/%d", l.Name, l.Status.ReadyReplicas, ptr.Deref(l.Spec.Replicas, 1)))
		}
		sort.Strings(names)
		fmt.Fprintf(&b, "  leaderworkersets: %s\n", strings.Join(names, " "))
		var revs []string
		for _, r := range w.revs {
			revs = append(revs, fmt.Sprintf("%s#%d", r.Name, r.Revision))
		}
		sort.Strings(revs)
		fmt.Fprintf(&b, "  revisions: %s\n", strings.Join(revs, " "))
	}
	if s.hooks.describe != nil {
		b.WriteString(s.hooks.describe())
	}
	return b.String()
}

// disagg builds a disaggregated DGD with maxSurge 1, maxUnavailable 0.
func disagg(ns, name string, prefill, decode int32, image string) *v1alpha1.DynamoGraphDeployment {
	return harness.NewDGD(ns, name).Disagg(prefill, decode, image).Rollout("1", "0").Obj()
}
