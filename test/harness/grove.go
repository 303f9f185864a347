package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	apicommon "github.com/ai-dynamo/grove/operator/api/common"
	groveconst "github.com/ai-dynamo/grove/operator/api/common/constants"
	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	grovefake "github.com/dgd-rollout/operator/test/grove"
)

// The fake Grove below plays the Grove operator v0.1.0-alpha.12-rc1 (tag
// operator/v0.1.0-alpha.12-rc1 of github.com/ai-dynamo/grove) for envtest, which runs
// no controller of its own. Every behaviour it models is the real operator's, read from
// that tag (paths relative to operator/; PCSC, PCSGC and PCLQC are the PodCliqueSet,
// PodCliqueScalingGroup and PodClique controllers under internal/controller):
//
//   - names: PodClique `<pcs>-0-<clique>`, PCSG `<pcs>-0-<group>`, the PCSG's PodCliques
//     `<pcs>-0-<group>-<j>-<clique>`, pods `<pclq>-<random>`, headless Service `<pcs>-0`
//     (api/common/namegen.go);
//   - owners and finalizers: standalone PodCliques and PCSGs are controlled by the
//     PodCliqueSet, a PCSG's PodCliques by the PCSG, pods by their PodClique; each of
//     the three Grove kinds carries Grove's finalizer, which deletion just removes,
//     leaving the cascade to the garbage collector (PCSC/reconciledelete.go), which
//     this fake also plays (envtest runs none);
//   - labels: PCSGs carry only Grove's labels (managed-by grove-operator, part-of,
//     name, component, replica index: PCSC/components/podcliquescalinggroup), never the
//     clique template's; PodCliques and pods, with their labels, env, hostname and
//     subdomain, are built by test/grove (StandalonePodClique, ScalingGroupPodClique,
//     Pod), which documents what Grove sets on them and nothing more;
//   - timing: no PodClique exists before the service-account token Secret is filled,
//     which the PodCliqueSet controller notices on a 5 s requeue (PCSC satokensecret);
//     a PCSG replica beyond minAvailable is a scaled PodGang whose pods keep their
//     scheduling gate until the base gang is scheduled, noticed on a 5 s requeue
//     (PCLQC/components/pod/syncflow.go);
//   - status: PodClique counts from its pods, observedGeneration not written while a
//     pod is gated or a rolling update runs, MinAvailableBreached and
//     PodCliqueScheduled conditions (PCLQC/reconcilestatus.go); PCSG
//     availableReplicas counts a gang only when every PodClique of it is scheduled and
//     ready (PCSGC/reconcilestatus.go), computed from the PodCliques as they were when
//     its controller last ran, so a PCSG's status change arrives after its cliques';
//   - scale-in deletes unready pods first, then the newest (PCLQC/components/pod/
//     deletionsort.go); a PCSG scale-in removes the highest replicas;
//   - RollingRecreate on a template change: a standalone PodClique's not-ready old pods
//     go at once, then one ready pod at a time is deleted before its replacement is
//     created (PCLQC/components/pod/rollingupdate.go); a PCSG replaces whole gangs, one
//     ready gang at a time, lowest index first (PCSGC/components/podclique/
//     rollingupdate.go); template replica counts never reach existing objects;
//   - events: AllScheduledReplicasLost (Warning, on the PodClique) when its scheduled
//     pods drop from some to none (PCLQC/reconcilestatus.go); deleting a PodCliqueSet
//     emits none.
//
// Not modelled: PodGang objects (their effect, the scheduling gate, is), the init
// container of startsAfter ordering (our PodCliqueSets use AnyOrder), gang termination
// after terminationDelay (4 h: no test runs that long; breaches are asserted on
// instead), HPA, topology and resource sharing.

// GroveTiming holds the delays of the fake Grove. The defaults are the real operator's.
type GroveTiming struct {
	// Token is how long after a PodCliqueSet is created its PodCliques and PCSGs appear.
	Token time.Duration
	// Gate is how long a scaled gang's pods stay gated after the base gang is scheduled.
	Gate time.Duration
}

// DefaultGroveTiming is Grove's: the PodCliqueSet controller requeues every 5 s while it
// waits for the token, and the PodClique controller every 5 s while pods are gated.
var DefaultGroveTiming = GroveTiming{Token: 5 * time.Second, Gate: 5 * time.Second}

// FastGroveTiming is Grove's two waits at 200 ms, for suites whose specs do not time
// them: the fake does what Grove does in Grove's order, only the waits are shorter.
var FastGroveTiming = GroveTiming{Token: 200 * time.Millisecond, Gate: 200 * time.Millisecond}

const (
	// maxGroveWait bounds how long one Play waits for the fake's next timed action.
	maxGroveWait = 20 * time.Second
)

// groveState is what the fake Grove remembers between plays: when Grove first found a
// scaled gang's PodClique blocked on its gate (it looks again every 5 s from then).
type groveState struct {
	mu         sync.Mutex
	timing     *GroveTiming
	gatedSince map[types.UID]time.Time
	seen       map[types.UID]time.Time // PodCliqueSet -> first reconciled
}

// firstSeen is when the fake Grove first saw a PodCliqueSet (its creationTimestamp has
// only whole seconds): Grove's token wait runs from its first reconcile.
func (g *groveState) firstSeen(uid types.UID, now time.Time) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == nil {
		g.seen = map[types.UID]time.Time{}
	}
	if t, ok := g.seen[uid]; ok {
		return t
	}
	g.seen[uid] = now
	return now
}

func (g *groveState) times() GroveTiming {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.timing == nil {
		return DefaultGroveTiming
	}
	return *g.timing
}

// SetGroveTiming replaces the fake Grove's delays (tests of timing-insensitive
// behaviour may shorten them).
func (e *Env) SetGroveTiming(t GroveTiming) {
	e.grove.mu.Lock()
	defer e.grove.mu.Unlock()
	e.grove.timing = &t
}

// PodCliqueSets lists the PodCliqueSets a DGD controls (none when the Grove CRDs are not
// installed).
func (e *Env) PodCliqueSets(ctx context.Context, ns, dgd string) ([]grovev1.PodCliqueSet, error) {
	var d v1alpha1.DynamoGraphDeployment
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: dgd}, &d); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	var list grovev1.PodCliqueSetList
	err := e.Client.List(ctx, &list, client.InNamespace(ns))
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	var out []grovev1.PodCliqueSet
	for _, p := range list.Items {
		if metav1.IsControlledBy(&p, &d) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// groveWorld is every Grove object of a namespace, read once per play.
type groveWorld struct {
	sets   []grovev1.PodCliqueSet
	pcsgs  []grovev1.PodCliqueScalingGroup
	pclqs  []grovev1.PodClique
	pods   []corev1.Pod
	byUID  map[types.UID]client.Object
	podsOf map[types.UID][]*corev1.Pod // PodClique UID -> its pods
}

func (e *Env) readGrove(ctx context.Context, ns string) (*groveWorld, error) {
	w := &groveWorld{byUID: map[types.UID]client.Object{}, podsOf: map[types.UID][]*corev1.Pod{}}
	var sets grovev1.PodCliqueSetList
	if err := e.Client.List(ctx, &sets, client.InNamespace(ns)); err != nil {
		if meta.IsNoMatchError(err) {
			return w, nil
		}
		return nil, err
	}
	var pcsgs grovev1.PodCliqueScalingGroupList
	if err := e.Client.List(ctx, &pcsgs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var pclqs grovev1.PodCliqueList
	if err := e.Client.List(ctx, &pclqs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := e.Client.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{apicommon.LabelPodClique}); err != nil {
		return nil, err
	}
	w.sets, w.pcsgs, w.pclqs, w.pods = sets.Items, pcsgs.Items, pclqs.Items, pods.Items
	for i := range w.sets {
		w.byUID[w.sets[i].UID] = &w.sets[i]
	}
	for i := range w.pcsgs {
		w.byUID[w.pcsgs[i].UID] = &w.pcsgs[i]
	}
	for i := range w.pclqs {
		w.byUID[w.pclqs[i].UID] = &w.pclqs[i]
	}
	for i := range w.pods {
		if ref := metav1.GetControllerOf(&w.pods[i]); ref != nil {
			w.podsOf[ref.UID] = append(w.podsOf[ref.UID], &w.pods[i])
		}
	}
	return w, nil
}

// live reports whether o's controller exists and is not being deleted.
func (w *groveWorld) live(o metav1.Object) bool {
	ref := metav1.GetControllerOf(o)
	if ref == nil {
		return false
	}
	owner, ok := w.byUID[ref.UID]
	return ok && owner.GetDeletionTimestamp().IsZero()
}

// pcsOf is the PodCliqueSet at the top of o's owner chain, or nil.
func (w *groveWorld) pcsOf(o metav1.Object) *grovev1.PodCliqueSet {
	for hop := 0; hop < 3 && o != nil; hop++ {
		ref := metav1.GetControllerOf(o)
		if ref == nil {
			return nil
		}
		owner, ok := w.byUID[ref.UID]
		if !ok {
			return nil
		}
		if pcs, ok := owner.(*grovev1.PodCliqueSet); ok {
			return pcs
		}
		o = owner
	}
	return nil
}

// PlayGrove plays the Grove operator (and the garbage collector, kube-scheduler and
// kubelet for Grove's pods) over every PodCliqueSet of the DGD's namespace once: it
// creates and deletes PodCliques, PCSGs and pods as Grove does, makes up to grow more
// pods of every standalone PodClique, or gangs of every PCSG, ready (grow < 0: all),
// and writes their status. When nothing can change until one of Grove's timed
// requeues (token, gate), it waits for it (at most maxGroveWait). It reports whether
// anything changed.
func (e *Env) PlayGrove(ctx context.Context, ns, dgd string, grow int32) (bool, error) {
	deadline := time.Now().Add(maxGroveWait)
	for {
		changed, due, err := e.groveStep(ctx, ns, grow)
		if err != nil || changed || due.IsZero() || due.After(deadline) {
			return changed, err
		}
		time.Sleep(time.Until(due) + 10*time.Millisecond)
	}
}

func (e *Env) groveStep(ctx context.Context, ns string, grow int32) (bool, time.Time, error) {
	w, err := e.readGrove(ctx, ns)
	if err != nil || len(w.sets) == 0 && len(w.pclqs) == 0 {
		return false, time.Time{}, err
	}
	s := &groveStep{e: e, w: w, grow: grow, timing: e.grove.times(), now: time.Now()}
	// The PCSG controller runs on what the PodCliques said before this play: its status
	// change follows theirs, as a separate event.
	for i := range w.pcsgs {
		if err := s.pcsgStatus(ctx, &w.pcsgs[i]); err != nil {
			return false, time.Time{}, err
		}
	}
	for _, run := range []func(context.Context) error{s.collectGarbage, s.syncSets, s.syncScalingGroups, s.syncPodCliques} {
		if err := run(ctx); err != nil {
			return false, time.Time{}, err
		}
	}
	return s.changed, s.due, nil
}

// groveStep is one play of the fake Grove.
type groveStep struct {
	e       *Env
	w       *groveWorld
	grow    int32
	timing  GroveTiming
	now     time.Time
	changed bool
	due     time.Time // the earliest timed requeue still pending
}

func (s *groveStep) wake(at time.Time) {
	if s.due.IsZero() || at.Before(s.due) {
		s.due = at
	}
}

// collectGarbage removes Grove's finalizers from objects being deleted and deletes
// objects whose controller is gone, as Grove's deletion flows and the garbage
// collector do.
func (s *groveStep) collectGarbage(ctx context.Context) error {
	var objs []client.Object
	for i := range s.w.sets {
		objs = append(objs, &s.w.sets[i])
	}
	for i := range s.w.pcsgs {
		objs = append(objs, &s.w.pcsgs[i])
	}
	for i := range s.w.pclqs {
		objs = append(objs, &s.w.pclqs[i])
	}
	for _, o := range objs {
		if !o.GetDeletionTimestamp().IsZero() && len(o.GetFinalizers()) > 0 {
			o.SetFinalizers(nil)
			if err := s.e.Client.Update(ctx, o); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return fmt.Errorf("fake Grove: removing finalizer of %s: %w", o.GetName(), err)
			}
			s.changed = true
			continue
		}
		if _, isSet := o.(*grovev1.PodCliqueSet); !isSet && !s.w.live(o) && o.GetDeletionTimestamp().IsZero() {
			if err := s.deleteObject(ctx, o); err != nil {
				return err
			}
		}
	}
	for i := range s.w.pods {
		if p := &s.w.pods[i]; !s.w.live(p) && p.DeletionTimestamp.IsZero() {
			if err := s.deleteObject(ctx, p); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *groveStep) deleteObject(ctx context.Context, o client.Object) error {
	if len(o.GetFinalizers()) > 0 {
		o.SetFinalizers(nil)
		if err := s.e.Client.Update(ctx, o); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("fake Grove: removing finalizer of %s: %w", o.GetName(), err)
		}
	}
	if err := s.e.Client.Delete(ctx, o, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("fake Grove: deleting %s: %w", o.GetName(), err)
	}
	s.changed = true
	return nil
}

// syncSets plays the PodCliqueSet controller: finalizer, then (once the token is
// there) the headless Service, the standalone PodCliques (spec and labels kept in step
// with the template, replicas kept) and the PCSGs.
func (s *groveStep) syncSets(ctx context.Context) error {
	for i := range s.w.sets {
		pcs := &s.w.sets[i]
		if !pcs.DeletionTimestamp.IsZero() {
			continue
		}
		if !controllerutil.ContainsFinalizer(pcs, groveconst.FinalizerPodCliqueSet) {
			controllerutil.AddFinalizer(pcs, groveconst.FinalizerPodCliqueSet)
			if err := s.e.Client.Update(ctx, pcs); err != nil && !apierrors.IsConflict(err) {
				return fmt.Errorf("fake Grove: finalizer of %s: %w", pcs.Name, err)
			}
			s.changed = true
			continue
		}
		if ready := s.e.grove.firstSeen(pcs.UID, s.now).Add(s.timing.Token); s.now.Before(ready) {
			s.wake(ready)
			continue
		}
		if err := s.syncSet(ctx, pcs); err != nil {
			return err
		}
	}
	return nil
}

func (s *groveStep) syncSet(ctx context.Context, pcs *grovev1.PodCliqueSet) error {
	replica := apicommon.ResourceNameReplica{Name: pcs.Name, Replica: 0}
	if err := s.headlessService(ctx, pcs, replica); err != nil {
		return err
	}
	inGroup := map[string]bool{}
	for _, g := range pcs.Spec.Template.PodCliqueScalingGroupConfigs {
		for _, n := range g.CliqueNames {
			inGroup[n] = true
		}
		name := apicommon.GeneratePodCliqueScalingGroupName(replica, g.Name)
		if s.find(name, "PodCliqueScalingGroup") != nil {
			// An existing PCSG keeps its replicas: Grove sets them only when it creates
			// it ("post-creation scaling must be done directly on the PCSG resource, not
			// via PCS template": PCSC/components/podcliquescalinggroup buildResource),
			// so a scale through its subresource sticks, on any PodCliqueSet (Dynamo's
			// being taken over too).
			continue
		}
		pcsg := &grovev1.PodCliqueScalingGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: pcs.Namespace, Name: name, Finalizers: []string{groveconst.FinalizerPodCliqueScalingGroup},
				Labels: groveLabels(pcs.Name, map[string]string{apicommon.LabelAppNameKey: name,
					apicommon.LabelComponentKey: apicommon.LabelComponentNamePodCliqueScalingGroup, apicommon.LabelPodCliqueSetReplicaIndex: "0"})},
			Spec: grovev1.PodCliqueScalingGroupSpec{Replicas: ptr.Deref(g.Replicas, 1), MinAvailable: g.MinAvailable, CliqueNames: g.CliqueNames},
		}
		if err := s.create(ctx, pcs, pcsg); err != nil {
			return err
		}
	}
	for _, t := range pcs.Spec.Template.Cliques {
		if inGroup[t.Name] {
			continue
		}
		want := grovefake.StandalonePodClique(pcs, t)
		have, _ := s.find(want.Name, "PodClique").(*grovev1.PodClique)
		if have == nil {
			if err := s.create(ctx, pcs, want); err != nil {
				return err
			}
			continue
		}
		// The PodCliqueSet controller rewrites a standalone PodClique's labels and spec
		// from the template on every reconcile, keeping its replicas.
		want.Spec.Replicas = have.Spec.Replicas
		if !mapsEqual(have.Labels, want.Labels) || !jsonEqual(have.Spec, want.Spec) {
			have.Labels, have.Spec = want.Labels, want.Spec
			if err := s.e.Client.Update(ctx, have); err != nil && !apierrors.IsConflict(err) {
				return fmt.Errorf("fake Grove: updating PodClique %s: %w", want.Name, err)
			}
			s.changed = true
		}
	}
	return nil
}

// syncScalingGroups plays the PCSG controller's spec flow: the PodCliques of every
// gang below spec.replicas exist (from the PodCliqueSet's current template), those
// above are deleted, and a template change replaces one ready gang at a time.
func (s *groveStep) syncScalingGroups(ctx context.Context) error {
	for i := range s.w.pcsgs {
		g := &s.w.pcsgs[i]
		pcs := s.w.pcsOf(g)
		if pcs == nil || !g.DeletionTimestamp.IsZero() || !pcs.DeletionTimestamp.IsZero() {
			continue
		}
		members := s.membersOf(g)
		for j, ms := range members {
			if j >= int(g.Spec.Replicas) {
				for _, m := range ms {
					if err := s.deleteObject(ctx, m); err != nil {
						return err
					}
				}
			}
		}
		if err := s.rollScalingGroup(ctx, pcs, g, members); err != nil {
			return err
		}
		for j := 0; j < int(g.Spec.Replicas); j++ {
			for _, name := range g.Spec.CliqueNames {
				if err := s.ensureMember(ctx, pcs, g, j, name); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// membersOf maps a PCSG's replica index to its live PodCliques.
func (s *groveStep) membersOf(g *grovev1.PodCliqueScalingGroup) map[int][]*grovev1.PodClique {
	out := map[int][]*grovev1.PodClique{}
	for i := range s.w.pclqs {
		c := &s.w.pclqs[i]
		if ref := metav1.GetControllerOf(c); ref != nil && ref.UID == g.UID && c.DeletionTimestamp.IsZero() {
			j, _ := strconv.Atoi(c.Labels[apicommon.LabelPodCliqueScalingGroupReplicaIndex])
			out[j] = append(out[j], c)
		}
	}
	return out
}

func (s *groveStep) ensureMember(ctx context.Context, pcs *grovev1.PodCliqueSet, g *grovev1.PodCliqueScalingGroup, j int, clique string) error {
	name := apicommon.GeneratePodCliqueName(apicommon.ResourceNameReplica{Name: g.Name, Replica: j}, clique)
	if s.find(name, "PodClique") != nil {
		return nil
	}
	var t *grovev1.PodCliqueTemplateSpec
	for _, c := range pcs.Spec.Template.Cliques {
		if c.Name == clique {
			t = c
		}
	}
	if t == nil {
		return nil
	}
	return s.create(ctx, g, grovefake.ScalingGroupPodClique(pcs, g, j, t))
}

// rollScalingGroup replaces gangs whose PodCliques run an older template: unavailable
// ones at once, then one available gang at a time, lowest index first, and only
// while the PCSG keeps minAvailable gangs (PCSGC/components/podclique/rollingupdate.go).
func (s *groveStep) rollScalingGroup(ctx context.Context, pcs *grovev1.PodCliqueSet, g *grovev1.PodCliqueScalingGroup, members map[int][]*grovev1.PodClique) error {
	var old []int
	for j, ms := range members {
		for _, m := range ms {
			if t := templateOf(pcs, m.Name); t != nil && m.Labels[apicommon.LabelPodTemplateHash] != grovefake.PodTemplateHash(t) {
				old = append(old, j)
				break
			}
		}
	}
	sort.Ints(old)
	deleteGang := func(j int) error {
		for _, m := range members[j] {
			if err := s.deleteObject(ctx, m); err != nil {
				return err
			}
		}
		return nil
	}
	for _, j := range old {
		if !gangAvailable(members[j]) {
			if err := deleteGang(j); err != nil {
				return err
			}
		}
	}
	for j := 0; j < int(g.Spec.Replicas); j++ {
		if len(members[j]) < len(g.Spec.CliqueNames) || !gangAvailable(members[j]) {
			return nil // a gang is being replaced (or still starting): one at a time
		}
	}
	for _, j := range old {
		if g.Status.AvailableReplicas >= ptr.Deref(g.Spec.MinAvailable, 1) {
			return deleteGang(j)
		}
	}
	return nil
}

func gangAvailable(ms []*grovev1.PodClique) bool {
	for _, m := range ms {
		if m.Status.ReadyReplicas < ptr.Deref(m.Spec.MinAvailable, 1) || m.Status.ScheduledReplicas < ptr.Deref(m.Spec.MinAvailable, 1) {
			return false
		}
	}
	return len(ms) > 0
}

// pcsgStatus plays the PCSG controller's status flow.
func (s *groveStep) pcsgStatus(ctx context.Context, g *grovev1.PodCliqueScalingGroup) error {
	if !g.DeletionTimestamp.IsZero() {
		return nil
	}
	members := s.membersOf(g)
	var scheduled, available int32
	gated := false
	for j := 0; j < int(g.Spec.Replicas); j++ {
		ms := members[j]
		if len(ms) != len(g.Spec.CliqueNames) {
			continue
		}
		sch, avail := true, true
		for _, m := range ms {
			sch = sch && m.Status.ScheduledReplicas >= ptr.Deref(m.Spec.MinAvailable, 1)
			avail = avail && m.Status.ReadyReplicas >= ptr.Deref(m.Spec.MinAvailable, 1)
			gated = gated || m.Status.ScheduleGatedReplicas > 0
		}
		if sch {
			scheduled++
			if avail {
				available++
			}
		}
	}
	st := g.Status.DeepCopy()
	st.Replicas, st.ScheduledReplicas, st.AvailableReplicas, st.UpdatedReplicas = g.Spec.Replicas, scheduled, available, available
	if !gated { // a sync that requeues (a gang still gated) leaves observedGeneration behind
		st.ObservedGeneration = ptr.To(g.Generation)
	}
	breached := metav1.ConditionFalse
	if available < ptr.Deref(g.Spec.MinAvailable, 1) {
		breached = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: groveconst.ConditionTypeMinAvailableBreached, Status: breached, Reason: "FakeGrove"})
	if g.Status.ScheduledReplicas > 0 && scheduled == 0 {
		if err := s.e.groveEvent(ctx, g, "PodCliqueScalingGroup", "AllScheduledReplicasLost", fmt.Sprintf("All scheduled replicas lost (was %d)", g.Status.ScheduledReplicas)); err != nil {
			return err
		}
	}
	if jsonEqual(*st, g.Status) {
		return nil
	}
	g.Status = *st
	return s.statusUpdate(ctx, g)
}

func (s *groveStep) statusUpdate(ctx context.Context, o client.Object) error {
	if err := s.e.Client.Status().Update(ctx, o); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("fake Grove: status of %s: %w", o.GetName(), err)
	}
	s.changed = true
	return nil
}

// create creates o controlled by owner unless it exists.
// headlessService plays the PodCliqueSet controller's headless Service of one replica
// (internal/controller/podcliqueset/components/service/service.go doCreateOrUpdate and
// buildResource): controllerutil.CreateOrPatch of `<pcs>-<replica>` (api/common/
// namegen.go GenerateHeadlessServiceName) with Grove's labels (managed-by
// grove-operator, part-of <pcs>, name, component pcs-headless-service, replica index),
// headless, selecting every pod of the replica (managed-by, part-of and replica index:
// getLabelSelectorForPodsInAPodCliqueSetReplica), publishNotReadyAddresses from the
// template's headlessServiceConfig (false when unset), controlled by the PodCliqueSet.
// A Service of that name that exists is patched into this shape: Grove creates or
// patches, never skips, and its SetControllerReference refuses one controlled by
// another object (AlreadyOwnedError), which is an error of the reconcile here too.
func (s *groveStep) headlessService(ctx context.Context, pcs *grovev1.PodCliqueSet, replica apicommon.ResourceNameReplica) error {
	name := apicommon.GenerateHeadlessServiceName(replica)
	publish := false
	if c := pcs.Spec.Template.HeadlessServiceConfig; c != nil {
		publish = c.PublishNotReadyAddresses
	}
	want := corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: publish,
		Selector: groveLabels(pcs.Name, map[string]string{apicommon.LabelPodCliqueSetReplicaIndex: strconv.Itoa(replica.Replica)})}
	labels := groveLabels(pcs.Name, map[string]string{apicommon.LabelAppNameKey: name,
		apicommon.LabelComponentKey: apicommon.LabelComponentNamePodCliqueSetReplicaHeadlessService, apicommon.LabelPodCliqueSetReplicaIndex: strconv.Itoa(replica.Replica)})
	var have corev1.Service
	err := s.e.Client.Get(ctx, client.ObjectKey{Namespace: pcs.Namespace, Name: name}, &have)
	if apierrors.IsNotFound(err) {
		return s.create(ctx, pcs, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: pcs.Namespace, Name: name, Labels: labels}, Spec: want})
	}
	if err != nil {
		return fmt.Errorf("fake Grove: getting Service %s: %w", name, err)
	}
	if ref := metav1.GetControllerOf(&have); ref != nil && (ref.Kind != "PodCliqueSet" || ref.Name != pcs.Name) {
		return fmt.Errorf("fake Grove: Service %s/%s is controlled by %s %s, not PodCliqueSet %s (Grove's AlreadyOwnedError)", pcs.Namespace, name, ref.Kind, ref.Name, pcs.Name)
	}
	patched := have.DeepCopy()
	if patched.Labels == nil {
		patched.Labels = map[string]string{}
	}
	maps.Copy(patched.Labels, labels)
	patched.Spec.Selector, patched.Spec.PublishNotReadyAddresses = want.Selector, want.PublishNotReadyAddresses
	if err := controllerutil.SetControllerReference(pcs, patched, s.e.Client.Scheme()); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(patched, &have) {
		return nil
	}
	if err := s.e.Client.Update(ctx, patched); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("fake Grove: patching Service %s: %w", name, err)
	}
	s.changed = true
	return nil
}

func (s *groveStep) create(ctx context.Context, owner, o client.Object) error {
	if err := controllerutil.SetControllerReference(owner, o, s.e.Client.Scheme()); err != nil {
		return err
	}
	err := s.e.Client.Create(ctx, o)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("fake Grove: creating %s: %w", o.GetName(), err)
	}
	s.changed = true
	return nil
}

func (s *groveStep) find(name, kind string) client.Object {
	switch kind {
	case "PodClique":
		for i := range s.w.pclqs {
			if s.w.pclqs[i].Name == name {
				return &s.w.pclqs[i]
			}
		}
	case "PodCliqueScalingGroup":
		for i := range s.w.pcsgs {
			if s.w.pcsgs[i].Name == name {
				return &s.w.pcsgs[i]
			}
		}
	}
	return nil
}

// groveEvent records an event on a Grove object as Grove's event recorder does (a core
// v1 Event).
func (e *Env) groveEvent(ctx context.Context, on client.Object, kind, reason, msg string) error {
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: on.GetNamespace(), GenerateName: on.GetName() + "."},
		InvolvedObject: corev1.ObjectReference{APIVersion: grovev1.SchemeGroupVersion.String(), Kind: kind,
			Namespace: on.GetNamespace(), Name: on.GetName(), UID: on.GetUID()},
		Reason: reason, Message: msg, Type: corev1.EventTypeWarning, Count: 1,
		FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "grove-operator"},
	}
	if err := e.Client.Create(ctx, ev); err != nil {
		return fmt.Errorf("fake Grove: event %s: %w", reason, err)
	}
	return nil
}

// GroveWarnings lists the Warning events the fake Grove recorded in a namespace, as
// "Reason on name".
func (e *Env) GroveWarnings(ctx context.Context, ns string) ([]string, error) {
	var evs corev1.EventList
	if err := e.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range evs.Items {
		if ev.Source.Component == "grove-operator" && ev.Type == corev1.EventTypeWarning {
			out = append(out, ev.Reason+" on "+ev.InvolvedObject.Name)
		}
	}
	return out, nil
}

// groveLabels are Grove's default labels on every object of a PodCliqueSet plus extra.
func groveLabels(pcs string, extra map[string]string) map[string]string {
	out := apicommon.GetDefaultLabelsForPodCliqueSetManagedResources(pcs)
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// templateOf finds the clique template a PodClique was made from (Grove matches by
// name suffix).
func templateOf(pcs *grovev1.PodCliqueSet, pclq string) *grovev1.PodCliqueTemplateSpec {
	for _, t := range pcs.Spec.Template.Cliques {
		if strings.HasSuffix(pclq, "-"+t.Name) {
			return t
		}
	}
	return nil
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func jsonEqual(a, b any) bool {
	ra, _ := json.Marshal(a)
	rb, _ := json.Marshal(b)
	return string(ra) == string(rb)
}
