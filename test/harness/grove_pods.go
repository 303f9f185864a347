package harness

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"time"

	apicommon "github.com/ai-dynamo/grove/operator/api/common"
	groveconst "github.com/ai-dynamo/grove/operator/api/common/constants"
	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/test/dynamoview"
	grovefake "github.com/dgd-rollout/operator/test/grove"
)

// syncPodCliques plays the PodClique controller (with kube-scheduler and the kubelet)
// for every live PodClique: pods to spec.replicas, RollingRecreate, scheduling gates,
// readiness, status and events.
func (s *groveStep) syncPodCliques(ctx context.Context) error {
	for i := range s.w.pclqs {
		c := &s.w.pclqs[i]
		if !c.DeletionTimestamp.IsZero() || !s.w.live(c) {
			continue
		}
		pcs := s.w.pcsOf(c)
		if pcs == nil {
			continue
		}
		pods := activePods(s.w.podsOf[c.UID])
		rolling, err := s.rollPodClique(ctx, c, pods)
		if err != nil {
			return err
		}
		if pods, err = s.scalePods(ctx, pcs, c, activePods(s.w.podsOf[c.UID])); err != nil {
			return err
		}
		gated, err := s.schedule(ctx, pcs, c, pods)
		if err != nil {
			return err
		}
		if err := s.makeReady(ctx, c, pods); err != nil {
			return err
		}
		if err := s.pclqStatus(ctx, c, pods, gated || rolling); err != nil {
			return err
		}
	}
	return nil
}

// activePods drops pods being deleted.
func activePods(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp.IsZero() {
			out = append(out, p)
		}
	}
	return out
}

// rollPodClique replaces the pods of a standalone PodClique whose template changed:
// not-ready old pods go at once; then, once every new pod is ready, the oldest ready old
// pod is deleted (its replacement is created by scalePods right after: Grove deletes
// before it creates). It reports whether an update is in progress.
func (s *groveStep) rollPodClique(ctx context.Context, c *grovev1.PodClique, pods []*corev1.Pod) (bool, error) {
	if c.Labels[apicommon.LabelPodCliqueScalingGroup] != "" {
		return false, nil // PCSG members are replaced whole by the PCSG
	}
	want := c.Labels[apicommon.LabelPodTemplateHash]
	var oldReady []*corev1.Pod
	newPending := false
	for _, p := range pods {
		switch {
		case p.Labels[apicommon.LabelPodTemplateHash] == want:
			newPending = newPending || !podReady(p)
		case !podReady(p):
			if err := s.deleteObject(ctx, p); err != nil {
				return true, err
			}
			p.DeletionTimestamp = ptr.To(metav1.Now())
		default:
			oldReady = append(oldReady, p)
		}
	}
	if len(oldReady) == 0 {
		return false, nil
	}
	if newPending || c.Status.ReadyReplicas < ptr.Deref(c.Spec.MinAvailable, 1) {
		return true, nil // one ready pod at a time: wait for the replacement
	}
	sort.Slice(oldReady, func(i, j int) bool { return oldReady[i].CreationTimestamp.Before(&oldReady[j].CreationTimestamp) })
	if err := s.deleteObject(ctx, oldReady[0]); err != nil {
		return true, err
	}
	oldReady[0].DeletionTimestamp = ptr.To(metav1.Now())
	return true, nil
}

// scalePods creates the missing pods (gated) and deletes the excess ones, unready
// first, then the newest (deletionsort.go), and returns the active pods.
func (s *groveStep) scalePods(ctx context.Context, pcs *grovev1.PodCliqueSet, c *grovev1.PodClique, pods []*corev1.Pod) ([]*corev1.Pod, error) {
	pods = activePods(pods)
	if excess := len(pods) - int(c.Spec.Replicas); excess > 0 {
		sort.SliceStable(pods, func(i, j int) bool {
			if podReady(pods[i]) != podReady(pods[j]) {
				return !podReady(pods[i])
			}
			if pods[i].Labels[apicommon.LabelPodTemplateHash] != pods[j].Labels[apicommon.LabelPodTemplateHash] {
				return pods[i].Labels[apicommon.LabelPodTemplateHash] != c.Labels[apicommon.LabelPodTemplateHash]
			}
			return pods[j].CreationTimestamp.Before(&pods[i].CreationTimestamp)
		})
		for _, p := range pods[:excess] {
			if err := s.deleteObject(ctx, p); err != nil {
				return nil, err
			}
		}
		pods = pods[excess:]
	}
	used := map[int]bool{}
	for _, p := range pods {
		k, _ := strconv.Atoi(p.Labels[apicommon.LabelPodCliquePodIndex])
		used[k] = true
	}
	for k := 0; len(pods) < int(c.Spec.Replicas); k++ {
		if used[k] {
			continue
		}
		p := grovefake.Pod(pcs, c, k)
		if err := s.create(ctx, c, p); err != nil {
			return nil, err
		}
		pods = append(pods, p)
	}
	return pods, nil
}

// schedule removes the scheduling gate where Grove would and binds ungated pods as
// kube-scheduler would (PodScheduled). A scaled gang (label base-podgang) stays gated
// until every PodClique of its base gang has minAvailable pods scheduled, and then until
// Grove's next 5 s requeue. It reports whether any pod is still gated.
func (s *groveStep) schedule(ctx context.Context, pcs *grovev1.PodCliqueSet, c *grovev1.PodClique, pods []*corev1.Pod) (bool, error) {
	gated := false
	for _, p := range pods {
		if len(p.Spec.SchedulingGates) > 0 {
			if open, at := s.gateOpen(pcs, c); !open {
				gated = true
				if !at.IsZero() {
					s.wake(at.Time)
				}
				continue
			}
			p.Spec.SchedulingGates = nil
			if err := s.e.Client.Update(ctx, p); err != nil {
				if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
					gated = true
					continue
				}
				return false, fmt.Errorf("fake Grove: ungating %s: %w", p.Name, err)
			}
			s.changed = true
		}
		if podCondition(p, corev1.PodScheduled) != corev1.ConditionTrue {
			setPodCondition(p, corev1.PodScheduled, corev1.ConditionTrue)
			setPodCondition(p, corev1.PodReady, corev1.ConditionFalse)
			p.Status.Phase = corev1.PodRunning
			// The kubelet reports the pod's IP once its sandbox runs; the EndpointSlice
			// controller lists no pod without one (ShouldPodBeInEndpoints).
			p.Status.PodIP = fakePodIP(p)
			p.Status.PodIPs = []corev1.PodIP{{IP: p.Status.PodIP}}
			if err := s.statusUpdate(ctx, p); err != nil {
				return false, err
			}
		}
	}
	return gated, nil
}

// gateOpen says whether Grove lifts a PodClique's gate now, or when it looks again. A
// scaled gang whose base gang is already scheduled when Grove first looks is ungated at
// once; one that had to wait is looked at again on the PodClique controller's 5 s
// requeue.
func (s *groveStep) gateOpen(pcs *grovev1.PodCliqueSet, c *grovev1.PodClique) (bool, metav1.Time) {
	if c.Labels[apicommon.LabelBasePodGang] == "" {
		return true, metav1.Time{}
	}
	base := apicommon.GenerateBasePodGangName(apicommon.ResourceNameReplica{Name: pcs.Name, Replica: 0})
	scheduled := true
	for i := range s.w.pclqs {
		m := &s.w.pclqs[i]
		if owner := s.w.pcsOf(m); owner == nil || owner.UID != pcs.UID || m.Labels[apicommon.LabelPodGang] != base {
			continue
		}
		scheduled = scheduled && m.Status.ScheduledReplicas >= ptr.Deref(m.Spec.MinAvailable, 1)
	}
	g := &s.e.grove
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gatedSince == nil {
		g.gatedSince = map[types.UID]time.Time{}
	}
	since, waited := g.gatedSince[c.UID]
	switch {
	case scheduled && !waited:
		return true, metav1.Time{}
	case !waited:
		g.gatedSince[c.UID] = s.now
		return false, metav1.NewTime(s.now.Add(s.timing.Gate))
	case !scheduled:
		return false, metav1.NewTime(s.now.Add(s.timing.Gate))
	}
	if at := since.Add(s.timing.Gate); s.now.Before(at) {
		return false, metav1.NewTime(at)
	}
	return true, metav1.Time{}
}

// makeReady plays the kubelet: up to grow more scheduled pods of a standalone
// PodClique become ready (oldest first), or, for a PCSG member, the pods of up to grow
// more whole gangs (grow < 0: all). A gang is made ready whole, never in part.
func (s *groveStep) makeReady(ctx context.Context, c *grovev1.PodClique, pods []*corev1.Pod) error {
	var candidates []*corev1.Pod
	for _, p := range pods {
		if podCondition(p, corev1.PodScheduled) == corev1.ConditionTrue && !podReady(p) {
			candidates = append(candidates, p)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	if g := c.Labels[apicommon.LabelPodCliqueScalingGroup]; g != "" {
		if !s.gangMayBecomeReady(c, g) {
			return nil
		}
	} else if s.grow >= 0 {
		sort.Slice(candidates, func(i, j int) bool { return candidates[i].CreationTimestamp.Before(&candidates[j].CreationTimestamp) })
		candidates = candidates[:min(len(candidates), int(s.grow))]
	}
	for _, p := range candidates {
		if err := s.waitRegistered(ctx, p); err != nil {
			return err
		}
		setPodCondition(p, corev1.PodReady, corev1.ConditionTrue)
		if err := s.statusUpdate(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// registerTimeout bounds how long a worker pod's runtime may take to publish its
// DynamoWorkerMetadata once the pod runs.
const registerTimeout = 30 * time.Second

// waitRegistered waits, with Env.RuntimeRegisters, until a worker pod's runtime has
// published its DynamoWorkerMetadata (named after the pod, owned by its UID): a Dynamo
// worker's readiness probe passes only after it registered. Without that order a
// loaded run could make a pod Ready, let the operator drain the old revision on it,
// and show a frontend with no discoverable worker that no real cluster would show.
func (s *groveStep) waitRegistered(ctx context.Context, p *corev1.Pod) error {
	if !s.e.RuntimeRegisters {
		return nil
	}
	if rt, ok := dynamoview.RuntimeOf(p); !ok || !rt.IsWorker() {
		return nil
	}
	dwm := &unstructured.Unstructured{}
	dwm.SetGroupVersionKind(dynamoview.DWMGVK)
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, registerTimeout, true, func(ctx context.Context) (bool, error) {
		err := s.e.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, dwm)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && dynamoview.PodOwnerUID(dwm) == string(p.UID), err
	})
	if err != nil {
		return fmt.Errorf("fake kubelet: worker pod %s/%s runs but its runtime published no DynamoWorkerMetadata within %s: %w", p.Namespace, p.Name, registerTimeout, err)
	}
	return nil
}

// gangMayBecomeReady decides, for one PCSG member PodClique, whether its gang is among
// the (up to grow) lowest not-yet-ready gangs of its PCSG whose every pod is scheduled.
func (s *groveStep) gangMayBecomeReady(c *grovev1.PodClique, pcsg string) bool {
	if s.grow < 0 {
		return true
	}
	mine, _ := strconv.Atoi(c.Labels[apicommon.LabelPodCliqueScalingGroupReplicaIndex])
	type gang struct{ scheduled, ready bool }
	gangs := map[int]*gang{}
	for i := range s.w.pclqs {
		m := &s.w.pclqs[i]
		if m.Labels[apicommon.LabelPodCliqueScalingGroup] != pcsg || !m.DeletionTimestamp.IsZero() {
			continue
		}
		j, _ := strconv.Atoi(m.Labels[apicommon.LabelPodCliqueScalingGroupReplicaIndex])
		if gangs[j] == nil {
			gangs[j] = &gang{scheduled: true, ready: true}
		}
		for _, p := range activePods(s.w.podsOf[m.UID]) {
			gangs[j].scheduled = gangs[j].scheduled && podCondition(p, corev1.PodScheduled) == corev1.ConditionTrue
			gangs[j].ready = gangs[j].ready && podReady(p)
		}
		n := int32(len(activePods(s.w.podsOf[m.UID])))
		gangs[j].scheduled = gangs[j].scheduled && n >= m.Spec.Replicas
		gangs[j].ready = gangs[j].ready && n >= m.Spec.Replicas
	}
	var idx []int
	for j, g := range gangs {
		if g.scheduled && !g.ready {
			idx = append(idx, j)
		}
	}
	sort.Ints(idx)
	for k, j := range idx {
		if j == mine {
			return k < int(s.grow)
		}
	}
	return false
}

// pclqStatus writes a PodClique's status from its pods (PCLQC/reconcilestatus.go).
// observedGeneration is left behind while the sync requeues (a gated pod, a rolling
// update), as Grove leaves it.
func (s *groveStep) pclqStatus(ctx context.Context, c *grovev1.PodClique, pods []*corev1.Pod, requeue bool) error {
	st := c.Status.DeepCopy()
	st.Replicas, st.ReadyReplicas, st.ScheduledReplicas, st.ScheduleGatedReplicas, st.UpdatedReplicas = 0, 0, 0, 0, 0
	want := c.Labels[apicommon.LabelPodTemplateHash]
	for _, p := range pods {
		st.Replicas++
		if podReady(p) {
			st.ReadyReplicas++
		}
		if podCondition(p, corev1.PodScheduled) == corev1.ConditionTrue {
			st.ScheduledReplicas++
		} else if len(p.Spec.SchedulingGates) > 0 {
			st.ScheduleGatedReplicas++
		}
		if p.Labels[apicommon.LabelPodTemplateHash] == want {
			st.UpdatedReplicas++
		}
	}
	if !requeue {
		st.ObservedGeneration = ptr.To(c.Generation)
	}
	if st.ObservedGeneration != nil {
		minAvailable := ptr.Deref(c.Spec.MinAvailable, 1)
		scheduled, breached := metav1.ConditionTrue, metav1.ConditionFalse
		if st.ScheduledReplicas < minAvailable {
			scheduled, breached = metav1.ConditionFalse, metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: groveconst.ConditionTypePodCliqueScheduled, Status: scheduled, Reason: "FakeGrove"})
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: groveconst.ConditionTypeMinAvailableBreached, Status: breached, Reason: "FakeGrove"})
		if c.Status.ScheduledReplicas > 0 && st.ScheduledReplicas == 0 {
			if err := s.e.groveEvent(ctx, c, "PodClique", "AllScheduledReplicasLost",
				fmt.Sprintf("All scheduled pods lost (was %d). Gang termination will fire after TerminationDelay if the PodClique stays below MinAvailable; investigate node availability or capacity.", c.Status.ScheduledReplicas)); err != nil {
				return err
			}
		}
	}
	if jsonEqual(*st, c.Status) {
		return nil
	}
	c.Status = *st
	return s.statusUpdate(ctx, c)
}

func podReady(p *corev1.Pod) bool { return podCondition(p, corev1.PodReady) == corev1.ConditionTrue }

func podCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

func setPodCondition(p *corev1.Pod, t corev1.PodConditionType, v corev1.ConditionStatus) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			p.Status.Conditions[i].Status = v
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: v, LastTransitionTime: metav1.Now()})
}

// fakePodIP is a pod's address in 10.0.0.0/8, from its UID.
func fakePodIP(p *corev1.Pod) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(p.UID))
	n := h.Sum32()
	return fmt.Sprintf("10.%d.%d.%d", n>>16&0xff, n>>8&0xff, n&0xff|1)
}
