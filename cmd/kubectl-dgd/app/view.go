package app

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	apicommon "github.com/ai-dynamo/grove/operator/api/common"
	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/revisions"
)

// role is what a worker revision is to the rollout: the tag "get" prints beside it.
type role string

const (
	roleStable  role = "stable"  // status.currentRevision's workers (the update one once rolled out)
	roleCanary  role = "canary"  // the update revision while a rollout is under way
	roleAborted role = "aborted" // the update revision of an aborted rollout
	roleOld     role = "old"     // any other revision still running (a rollout replaced it mid-way)
)

var roleColours = map[role]int{roleStable: ansiGreen, roleCanary: ansiYellow, roleAborted: ansiRed}

// revision is one worker revision as it runs: its number, hash, change cause and role.
type revision struct {
	number int64
	hash   string
	cause  string
	role   role
}

// revisionsOf names every worker hash the status or the live objects know: the number
// and change cause of the newest ControllerRevision with that hash (a revision that
// changed only stable services shares its worker hash with the one before), except that
// the update and stable hashes take the numbers the status gives them.
func revisionsOf(l *live) map[string]*revision {
	st := &l.dgd.Status
	out := map[string]*revision{}
	stableName := st.CurrentRevision
	if ru := st.RollingUpdate; ru != nil && ru.Abort != nil && ru.Abort.StableRevision != "" {
		stableName = ru.Abort.StableRevision
	}
	stable := ""
	for _, rev := range l.revs { // oldest first: the newest of a hash wins
		h := revisions.HashOf(rev)
		out[h] = &revision{number: rev.Revision, hash: h, cause: rev.Annotations[v1alpha1.AnnotationChangeCause], role: roleOld}
		if rev.Name == stableName {
			stable = h
		}
	}
	for _, rev := range l.revs {
		if rev.Name == stableName {
			out[stable].number, out[stable].cause = rev.Revision, rev.Annotations[v1alpha1.AnnotationChangeCause]
		}
	}
	if r := out[stable]; r != nil {
		r.role = roleStable
	}
	if u := st.UpdateWorkerHash; u != "" {
		r := out[u]
		if r == nil {
			r = &revision{hash: u}
			out[u] = r
		}
		r.number = st.UpdateRevisionNumber
		switch ru := st.RollingUpdate; {
		case ru != nil && ru.Phase == v1alpha1.RolloutAborted:
			r.role = roleAborted
		case u != stable:
			r.role = roleCanary
		}
	}
	return out
}

// builder builds the tree of one live view.
type builder struct {
	l     *live
	st    style
	now   time.Time
	revs  map[string]*revision
	label map[string]string // service label value -> service name
}

// tree is the DGD's row, its revisions (the update one first, then the stable one,
// then the others, newest first), each with its services, and last the services that
// are not versioned (frontend, planner...).
func (b *builder) tree() *node {
	root := &node{symbol: symbolDGD, name: b.l.dgd.Name, kind: "DynamoGraphDeployment", age: b.age(b.l.dgd.ObjectMeta)}
	root.tone, root.status = phaseHealth(b.l.dgd)
	hashes := b.liveHashes()
	slices.SortFunc(hashes, func(x, y string) int {
		rx, ry := b.revs[x], b.revs[y]
		return cmp.Or(cmp.Compare(rank(rx.role), rank(ry.role)), cmp.Compare(ry.number, rx.number), strings.Compare(x, y))
	})
	for _, h := range hashes {
		r := b.revs[h]
		name := "revision:" + strconv.FormatInt(r.number, 10)
		if r.number == 0 {
			name = "revision:?" // a hash no ControllerRevision records (deleted from history)
		}
		info := []string{b.st.paint(string(r.role), roleColours[r.role]), "hash:" + h}
		if r.cause != "" {
			info = append(info, r.cause)
		}
		rev := &node{symbol: symbolRevision, name: name, kind: "Revision", nameColour: roleColours[r.role], info: strings.Join(info, ", ")}
		root.add(rev.add(b.services(h)...))
	}
	if shared := b.services(""); len(shared) > 0 {
		root.add((&node{symbol: symbolRevision, name: "unversioned", info: "services updated in place"}).add(shared...))
	}
	return root
}

func rank(r role) int {
	return slices.Index([]role{roleCanary, roleAborted, roleStable, roleOld}, r)
}

// liveHashes are the worker hashes of the workloads and pods that exist, and the
// update revision's (which has none yet at the start of a rollout). Every one gets a
// revision entry.
func (b *builder) liveHashes() []string {
	seen := map[string]bool{}
	add := func(labels map[string]string) {
		if h := labels[v1alpha1.LabelWorkerHash]; h != "" {
			seen[h] = true
		}
	}
	if h := b.l.dgd.Status.UpdateWorkerHash; h != "" {
		seen[h] = true
	}
	for i := range b.l.deploys {
		add(b.l.deploys[i].Labels)
	}
	for i := range b.l.lwss {
		add(b.l.lwss[i].Labels)
	}
	for i := range b.l.cliques {
		add(b.l.cliques[i].Labels)
	}
	for i := range b.l.pods {
		add(b.l.pods[i].Labels)
	}
	var out []string
	for h := range seen {
		if b.revs[h] == nil {
			b.revs[h] = &revision{hash: h, role: roleOld}
		}
		out = append(out, h)
	}
	return out
}

// services are the rows of the services with workloads or pods of worker hash h ("":
// unversioned), in the DGD's order.
func (b *builder) services(h string) []*node {
	var out []*node
	for _, name := range b.l.dgd.ServiceNames() {
		ws := b.workloads(name, h)
		if len(ws) == 0 {
			continue
		}
		svc := &node{symbol: symbolService, name: name, kind: "Service"}
		ready, total := 0, 0
		for _, p := range b.podsWhere(name, h, func(*corev1.Pod) bool { return true }) {
			total++
			if podutils.IsPodReady(p) {
				ready++
			}
		}
		svc.info = fmt.Sprintf("pods ready:%d/%d", ready, total)
		out = append(out, svc.add(ws...))
	}
	return out
}

// workloads are the rows of service name's workloads of hash h, whichever the kind,
// and of its pods that belong to none of them (left by a workload already deleted).
func (b *builder) workloads(name, h string) []*node {
	mine := func(labels map[string]string) bool {
		return b.label[labels[v1alpha1.LabelService]] == name && labels[v1alpha1.LabelWorkerHash] == h
	}
	claimed := map[string]bool{}
	var out []*node
	out = append(out, b.deployments(mine, claimed)...)
	out = append(out, b.leaderWorkerSets(mine, claimed)...)
	out = append(out, b.grove(mine, claimed)...)
	for _, p := range b.podsWhere(name, h, func(p *corev1.Pod) bool { return !claimed[p.Name] }) {
		out = append(out, b.pod(p))
	}
	return out
}

// podsWhere are the pods of service name and hash h that keep says to, by name.
func (b *builder) podsWhere(name, h string, keep func(*corev1.Pod) bool) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range b.l.pods {
		p := &b.l.pods[i]
		if b.label[p.Labels[v1alpha1.LabelService]] == name && p.Labels[v1alpha1.LabelWorkerHash] == h && keep(p) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(x, y *corev1.Pod) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// podRows are the rows of the pods keep selects (and claims them), by name.
func (b *builder) podRows(claimed map[string]bool, keep func(*corev1.Pod) bool) []*node {
	var out []*node
	for i := range b.l.pods {
		p := &b.l.pods[i]
		if !claimed[p.Name] && keep(p) {
			claimed[p.Name] = true
			out = append(out, b.pod(p))
		}
	}
	slices.SortFunc(out, func(x, y *node) int { return strings.Compare(x.name, y.name) })
	return out
}

// deployments are the rows of the Deployments mine selects, each with its pods: those
// of its ReplicaSets (a pod's owner is "<deployment>-<pod-template-hash>").
func (b *builder) deployments(mine func(map[string]string) bool, claimed map[string]bool) []*node {
	var out []*node
	for i := range b.l.deploys {
		d := &b.l.deploys[i]
		if !mine(d.Labels) {
			continue
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		n := &node{symbol: symbolWorkload, name: d.Name, kind: "Deployment", age: b.age(d.ObjectMeta),
			info: fmt.Sprintf("ready:%d/%d", d.Status.ReadyReplicas, want)}
		n.tone, n.status = replicasHealth(want, d.Status.Replicas, d.Status.ReadyReplicas)
		out = append(out, n.add(b.podRows(claimed, func(p *corev1.Pod) bool { return ownedByDeployment(p, d.Name) })...))
	}
	return out
}

// ownedByDeployment reports whether p's ReplicaSet is one of Deployment name's: the
// Deployment controller names it "<deployment>-<pod-template-hash>" and puts that hash
// on the pod (kubernetes pkg/controller/deployment/sync.go getNewReplicaSet).
func ownedByDeployment(p *corev1.Pod, name string) bool {
	owner := metav1.GetControllerOf(p)
	return owner != nil && owner.Kind == "ReplicaSet" && owner.Name == name+"-"+p.Labels["pod-template-hash"]
}

// leaderWorkerSets are the rows of the LeaderWorkerSets mine selects, each with its
// gangs (groups): the pods LWS labels with the set's name and the group's index
// (sigs.k8s.io/lws api/leaderworkerset/v1 SetNameLabelKey, GroupIndexLabelKey).
func (b *builder) leaderWorkerSets(mine func(map[string]string) bool, claimed map[string]bool) []*node {
	var out []*node
	for i := range b.l.lwss {
		l := &b.l.lwss[i]
		if !mine(l.Labels) {
			continue
		}
		want, size := ptr.Deref(l.Spec.Replicas, 1), ptr.Deref(l.Spec.LeaderWorkerTemplate.Size, 1)
		n := &node{symbol: symbolWorkload, name: l.Name, kind: "LeaderWorkerSet", age: b.age(l.ObjectMeta),
			info: fmt.Sprintf("groups ready:%d/%d, size:%d", l.Status.ReadyReplicas, want, size)}
		n.tone, n.status = replicasHealth(want, l.Status.Replicas, l.Status.ReadyReplicas)
		for _, g := range b.groups(claimed, lwsv1.SetNameLabelKey, l.Name, lwsv1.GroupIndexLabelKey) {
			ready := readyPods(g.pods)
			n.add(gang(l.Name+"-"+g.index, fmt.Sprintf("pods ready:%d/%d", ready, size), ready == int(size) && len(g.pods) == ready, g.pods))
		}
		out = append(out, n)
	}
	return out
}

// group is the pods of one gang, by index.
type group struct {
	index string
	pods  []*node
}

// groups claims the pods whose label setKey is set, split by their label indexKey,
// in index order.
func (b *builder) groups(claimed map[string]bool, setKey, set, indexKey string) []group {
	byIndex := map[string][]*corev1.Pod{}
	for i := range b.l.pods {
		p := &b.l.pods[i]
		if p.Labels[setKey] == set && !claimed[p.Name] {
			byIndex[p.Labels[indexKey]] = append(byIndex[p.Labels[indexKey]], p)
		}
	}
	var out []group
	for idx, pods := range byIndex {
		g := group{index: idx}
		g.pods = b.podRows(claimed, func(p *corev1.Pod) bool { return slices.Contains(pods, p) })
		out = append(out, g)
	}
	slices.SortFunc(out, func(x, y group) int {
		a, _ := strconv.Atoi(x.index)
		c, _ := strconv.Atoi(y.index)
		return cmp.Compare(a, c)
	})
	return out
}

// gang is a gang's row: Healthy when healthy, Progressing otherwise.
func gang(name, info string, healthy bool, children []*node) *node {
	n := &node{symbol: symbolGang, name: name, kind: "Gang", info: info, tone: healthProgressing, status: "Progressing"}
	if healthy {
		n.tone, n.status = healthOK, "Healthy"
	}
	return n.add(children...)
}

// readyPods counts the pod rows that are ready.
func readyPods(pods []*node) int {
	ready := 0
	for _, p := range pods {
		if p.tone == healthOK {
			ready++
		}
	}
	return ready
}

// grove is the rows of the Grove objects mine selects: a standalone PodClique (a
// single-node service) with its pods, or a PodCliqueScalingGroup (a multinode service)
// with its gangs, each the cliques of one replica of the group (leader and workers).
// PodCliques carry the labels of their template in our PodCliqueSet (ours, with the
// worker hash); a group is found through its cliques' grove.io/podcliquescalinggroup
// label (grove operator/api common.LabelPodCliqueScalingGroup).
func (b *builder) grove(mine func(map[string]string) bool, claimed map[string]bool) []*node {
	var out []*node
	groups := map[string]bool{}
	for i := range b.l.cliques {
		c := &b.l.cliques[i]
		if !mine(c.Labels) {
			continue
		}
		if g := c.Labels[apicommon.LabelPodCliqueScalingGroup]; g != "" {
			groups[g] = true
			continue
		}
		out = append(out, b.clique(c.Name, claimed))
	}
	for i := range b.l.pcsgs {
		g := &b.l.pcsgs[i]
		if groups[g.Name] {
			out = append(out, b.scalingGroup(i, claimed))
		}
	}
	slices.SortFunc(out, func(x, y *node) int { return strings.Compare(x.name, y.name) })
	return out
}

// clique is a PodClique's row with its pods (labelled grove.io/podclique: <name>).
func (b *builder) clique(name string, claimed map[string]bool) *node {
	var c *grovev1.PodClique
	for i := range b.l.cliques {
		if b.l.cliques[i].Name == name {
			c = &b.l.cliques[i]
		}
	}
	n := &node{symbol: symbolWorkload, name: c.Name, kind: "PodClique", age: b.age(c.ObjectMeta),
		info: fmt.Sprintf("ready:%d/%d, podcliqueset:%s", c.Status.ReadyReplicas, c.Spec.Replicas, c.Labels[apicommon.LabelPartOfKey])}
	n.tone, n.status = replicasHealth(c.Spec.Replicas, c.Status.Replicas, c.Status.ReadyReplicas)
	return n.add(b.podRows(claimed, func(p *corev1.Pod) bool { return p.Labels[apicommon.LabelPodClique] == c.Name })...)
}

// scalingGroup is the row of the i-th PodCliqueScalingGroup, with a gang per replica
// index: its PodCliques (grove.io/podcliquescalinggroup-replica-index), each with its pods.
func (b *builder) scalingGroup(i int, claimed map[string]bool) *node {
	g := &b.l.pcsgs[i]
	n := &node{symbol: symbolWorkload, name: g.Name, kind: "PodCliqueScalingGroup", age: b.age(g.ObjectMeta),
		info: fmt.Sprintf("available:%d/%d, podcliqueset:%s", g.Status.AvailableReplicas, g.Spec.Replicas, g.Labels[apicommon.LabelPartOfKey])}
	n.tone, n.status = replicasHealth(g.Spec.Replicas, g.Status.Replicas, g.Status.AvailableReplicas)
	byIndex := map[string][]*node{}
	for j := range b.l.cliques {
		c := &b.l.cliques[j]
		if c.Labels[apicommon.LabelPodCliqueScalingGroup] == g.Name {
			idx := c.Labels[apicommon.LabelPodCliqueScalingGroupReplicaIndex]
			byIndex[idx] = append(byIndex[idx], b.clique(c.Name, claimed))
		}
	}
	indexes := slices.Collect(maps.Keys(byIndex))
	slices.SortFunc(indexes, func(x, y string) int {
		a, _ := strconv.Atoi(x)
		c, _ := strconv.Atoi(y)
		return cmp.Compare(a, c)
	})
	for _, idx := range indexes {
		cliques := byIndex[idx]
		slices.SortFunc(cliques, func(x, y *node) int { return strings.Compare(x.name, y.name) })
		n.add(gang(g.Name+"-"+idx, fmt.Sprintf("cliques ready:%d/%d", readyPods(cliques), len(cliques)), readyPods(cliques) == len(cliques), cliques))
	}
	return n
}

// pod is a pod's row: Running, Pending, Failed... or Terminating, and its containers
// ready (and restarts, when any), as argo rollouts' get prints a pod.
func (b *builder) pod(p *corev1.Pod) *node {
	n := &node{symbol: symbolPod, name: p.Name, kind: "Pod", age: b.age(p.ObjectMeta)}
	ready, restarts := 0, int32(0)
	for _, c := range p.Status.ContainerStatuses {
		if c.Ready {
			ready++
		}
		restarts += c.RestartCount
	}
	info := []string{fmt.Sprintf("ready:%d/%d", ready, len(p.Spec.Containers))}
	if restarts > 0 {
		info = append(info, fmt.Sprintf("restarts:%d", restarts))
	}
	n.info = strings.Join(info, ",")
	n.status = string(p.Status.Phase)
	switch {
	case p.DeletionTimestamp != nil:
		n.tone, n.status = healthNeutral, "Terminating"
	case p.Status.Phase == corev1.PodFailed:
		n.tone = healthBad
	case podutils.IsPodReady(p):
		n.tone = healthOK
	default:
		n.tone = healthProgressing
	}
	if n.status == "" {
		n.status = string(corev1.PodPending)
	}
	return n
}

// replicasHealth is a workload's health from its replicas: ScaledDown at 0, Healthy
// when all want exist and are ready, Progressing otherwise.
func replicasHealth(want, have, ready int32) (tone, string) {
	switch {
	case want == 0 && have == 0:
		return healthNeutral, "ScaledDown"
	case have == want && ready >= want:
		return healthOK, "Healthy"
	}
	return healthProgressing, "Progressing"
}

// phaseHealth is the DGD's health from its rollout phase.
func phaseHealth(dgd *v1alpha1.DynamoGraphDeployment) (tone, string) {
	ru := dgd.Status.RollingUpdate
	if ru == nil || ru.Phase == "" {
		return healthProgressing, "Pending"
	}
	switch ru.Phase {
	case v1alpha1.RolloutCompleted:
		return healthOK, string(ru.Phase)
	case v1alpha1.RolloutPaused:
		return healthPaused, string(ru.Phase)
	case v1alpha1.RolloutFailed, v1alpha1.RolloutAborted:
		return healthBad, string(ru.Phase)
	}
	return healthProgressing, string(ru.Phase)
}

// age is kubectl's AGE of an object, "<unknown>" without a creation time.
func (b *builder) age(m metav1.ObjectMeta) string {
	if m.CreationTimestamp.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(b.now.Sub(m.CreationTimestamp.Time))
}

// serviceLabels maps the nvidia.com/dynamo-component value of each service of dgd to
// its name (the label holds the name cut to a label value).
func serviceLabels(dgd *v1alpha1.DynamoGraphDeployment) map[string]string {
	out := map[string]string{}
	for _, name := range dgd.ServiceNames() {
		out[backends.SelectorLabels(dgd, name, "")[v1alpha1.LabelService]] = name
	}
	return out
}
