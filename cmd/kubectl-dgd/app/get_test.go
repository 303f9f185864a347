package app

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apicommon "github.com/ai-dynamo/grove/operator/api/common"
	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from this run's output")

// t0 is when every fixture object was created; views are drawn ten minutes later.
var t0 = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)

func now() time.Time { return t0.Add(10 * time.Minute) }

// expectGolden compares got with testdata/name.golden, or rewrites it with -update.
func expectGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no golden file (go test ./cmd/kubectl-dgd/app -run %s -update): %v", t.Name(), err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// world is a DGD "vllm" in namespace "default" and the objects its backend's
// controllers made, as they make them (names, labels, owners): built by hand, read
// through a fake client.
type world struct {
	dgd  *v1alpha1.DynamoGraphDeployment
	objs []client.Object
	pods int
}

// newWorld is a DGD with a frontend and the workers given (name -> nodes per replica),
// on backend.
func newWorld(backend v1alpha1.BackendType, workers map[string]int32, replicas int32) *world {
	d := &v1alpha1.DynamoGraphDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "vllm", Namespace: "default", UID: "dgd-uid", Generation: 3, CreationTimestamp: metav1.NewTime(t0)},
		Spec: v1alpha1.DynamoGraphDeploymentSpec{Backend: backend, Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
			"Frontend": {ComponentType: v1alpha1.ComponentTypeFrontend, Replicas: ptr.To[int32](1)},
		}},
		Status: v1alpha1.DynamoGraphDeploymentStatus{ObservedGeneration: 3, Services: map[string]v1alpha1.ServiceStatus{}},
	}
	for name, nodes := range workers {
		s := &v1alpha1.DynamoComponentDeploymentSharedSpec{ComponentType: v1alpha1.ComponentTypeWorker, SubComponentType: name, Replicas: ptr.To(replicas)}
		if nodes > 1 {
			s.Multinode = &v1alpha1.MultinodeSpec{NodeCount: nodes}
		}
		d.Spec.Services[name] = s
	}
	return &world{dgd: d}
}

func (w *world) meta(name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels, CreationTimestamp: metav1.NewTime(t0)}
}

// revision adds ControllerRevision n of worker hash h, owned by the DGD.
func (w *world) revision(n int64, h, cause string) {
	m := w.meta(fmt.Sprintf("vllm-%s-%d", h, n), map[string]string{v1alpha1.LabelGraph: "vllm", v1alpha1.LabelWorkerHash: h})
	m.Annotations = map[string]string{v1alpha1.AnnotationChangeCause: cause}
	m.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "DynamoGraphDeployment", Name: "vllm", UID: "dgd-uid", Controller: ptr.To(true)}}
	w.objs = append(w.objs, &appsv1.ControllerRevision{ObjectMeta: m, Revision: n})
}

// status records on the DGD's status that service runs replicas (ready of them) on
// revision n.
func (w *world) status(service string, n int64, name string, replicas, ready int32) {
	ss := w.dgd.Status.Services[service]
	ss.Replicas += replicas
	ss.ReadyReplicas += ready
	ss.Workloads = append(ss.Workloads, v1alpha1.WorkloadStatus{Name: name, Revision: n, Replicas: replicas, ReadyReplicas: ready})
	w.dgd.Status.Services[service] = ss
}

// pod adds a pod with labels, owned by owner (kind/name), ready or not; a terminating
// one has a deletion timestamp (and a finalizer, which the fake client needs to keep it).
func (w *world) pod(name string, labels map[string]string, ownerKind, owner string, ready bool) *corev1.Pod {
	w.pods++
	p := &corev1.Pod{ObjectMeta: w.meta(name, labels), Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "vllm"}}}}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: ownerKind, Name: owner, UID: types.UID(owner), Controller: ptr.To(true)}}
	p.Status.Phase = corev1.PodRunning
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Ready: ready}}
	w.objs = append(w.objs, p)
	return p
}

// deployment adds service's Deployment of worker hash h ("" for a stable service) with
// replicas pods, the first ready of them, as the Deployment controller names and labels
// them: ReplicaSet <deployment>-<pod-template-hash>, pods <replicaset>-<suffix> with the
// template's labels and pod-template-hash (kubernetes pkg/controller/deployment/sync.go).
func (w *world) deployment(service, h string, replicas, ready int32) {
	name := backends.WorkloadName("vllm", service, h)
	labels := backends.Labels(w.dgd, service, h)
	d := &appsv1.Deployment{ObjectMeta: w.meta(name, labels), Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		Status: appsv1.DeploymentStatus{Replicas: replicas, ReadyReplicas: ready, UpdatedReplicas: replicas, AvailableReplicas: ready}}
	w.objs = append(w.objs, d)
	rs := name + "-5d8f7c9b6"
	for i := range replicas {
		pl := backends.Labels(w.dgd, service, h)
		pl["pod-template-hash"] = "5d8f7c9b6"
		w.pod(fmt.Sprintf("%s-%c%c4x2", rs, 'a'+rune(i), 'k'+rune(w.pods%7)), pl, "ReplicaSet", rs, i < ready)
	}
}

// leaderWorkerSet adds service's LeaderWorkerSet of hash h with groups gangs of size
// pods, the first readyGroups of them ready, as LWS v0.9.0 names and labels them: the
// leader <lws>-<group>, the workers <lws>-<group>-<worker>, labelled with the set's
// name, the group and worker index (api/leaderworkerset/v1 SetNameLabelKey,
// GroupIndexLabelKey, WorkerIndexLabelKey), the leaders owned by the leader
// StatefulSet <lws>, the workers by the group's StatefulSet <lws>-<group>.
func (w *world) leaderWorkerSet(service, h string, groups, size, readyGroups int32) {
	name := backends.GangSetName("vllm", service, h)
	l := &lwsv1.LeaderWorkerSet{ObjectMeta: w.meta(name, backends.Labels(w.dgd, service, h)),
		Spec:   lwsv1.LeaderWorkerSetSpec{Replicas: ptr.To(groups), LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{Size: ptr.To(size)}},
		Status: lwsv1.LeaderWorkerSetStatus{Replicas: groups, ReadyReplicas: readyGroups, UpdatedReplicas: groups}}
	w.objs = append(w.objs, l)
	for g := range groups {
		for k := range size {
			pl := backends.Labels(w.dgd, service, h)
			pl[lwsv1.SetNameLabelKey], pl[lwsv1.GroupIndexLabelKey], pl[lwsv1.WorkerIndexLabelKey] = name, strconv.Itoa(int(g)), strconv.Itoa(int(k))
			pod, owner := fmt.Sprintf("%s-%d", name, g), name
			if k > 0 {
				pod, owner = fmt.Sprintf("%s-%d-%d", name, g, k), fmt.Sprintf("%s-%d", name, g)
			}
			w.pod(pod, pl, "StatefulSet", owner, g < readyGroups)
		}
	}
}

// podCliqueSet adds a PodCliqueSet named pcs for worker hash h, holding a clique for
// each single-node service and a scaling group for each multinode one. Grove
// (operator/v0.1.0-alpha.12-rc1) names a clique <pcs>-<replica>-<clique> and a scaling
// group <pcs>-<replica>-<group>, whose cliques are <group>-<index>-<clique>; every one
// carries app.kubernetes.io/part-of: <pcs>, and the cliques (and pods) the template's
// labels (ours) plus grove.io/podclique and, in a group, grove.io/podcliquescalinggroup
// and its replica index (api/common/labels.go, namegen.go).
func (w *world) podCliqueSet(pcs, h string, replicas, ready int32, services ...string) {
	labels := map[string]string{v1alpha1.LabelGraph: "vllm", v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	if h != "" {
		labels[v1alpha1.LabelWorkerHash] = h
	}
	w.objs = append(w.objs, &grovev1.PodCliqueSet{ObjectMeta: w.meta(pcs, labels)})
	for _, service := range services {
		svc := w.dgd.Spec.Services[service]
		if !svc.IsMultinode() {
			w.clique(pcs, service, h, pcs+"-0-"+strings.ToLower(service), "", "", replicas, ready)
			continue
		}
		group := pcs + "-0-" + service
		w.objs = append(w.objs, &grovev1.PodCliqueScalingGroup{
			ObjectMeta: w.meta(group, map[string]string{apicommon.LabelPartOfKey: pcs}),
			Spec:       grovev1.PodCliqueScalingGroupSpec{Replicas: replicas},
			Status:     grovev1.PodCliqueScalingGroupStatus{Replicas: replicas, AvailableReplicas: ready}})
		for i := range replicas {
			idx := strconv.Itoa(int(i))
			r := int32(0)
			if i < ready {
				r = 1
			}
			w.clique(pcs, service, h, group+"-"+idx+"-"+service+"-ldr", group, idx, 1, r)
			w.clique(pcs, service, h, group+"-"+idx+"-"+service+"-wkr", group, idx, svc.NodeCount()-1, r*(svc.NodeCount()-1))
		}
	}
}

// clique adds a PodClique and its pods <clique>-<suffix>.
func (w *world) clique(pcs, service, h, name, group, index string, replicas, ready int32) {
	labels := backends.Labels(w.dgd, service, h)
	labels[apicommon.LabelPartOfKey] = pcs
	if group != "" {
		labels[apicommon.LabelPodCliqueScalingGroup], labels[apicommon.LabelPodCliqueScalingGroupReplicaIndex] = group, index
	}
	w.objs = append(w.objs, &grovev1.PodClique{ObjectMeta: w.meta(name, labels), Spec: grovev1.PodCliqueSpec{Replicas: replicas},
		Status: grovev1.PodCliqueStatus{Replicas: replicas, ReadyReplicas: ready}})
	for k := range replicas {
		pl := map[string]string{apicommon.LabelPodClique: name}
		for key, v := range labels {
			pl[key] = v
		}
		w.pod(fmt.Sprintf("%s-%c%c9q", name, 'a'+rune(k), 'm'+rune(w.pods%7)), pl, "PodClique", name, k < ready)
	}
}

// fakeSession is a session over a fake client holding w's objects.
func (w *world) fakeSession(t *testing.T) (*session, client.WithWatch) {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, appsv1.AddToScheme, corev1.AddToScheme, lwsv1.AddToScheme, grovev1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(w.objs, w.dgd)...).WithStatusSubresource(w.dgd).Build()
	return &session{client: c, namespace: "default", scheme: scheme}, c
}

// view draws the world once in style st.
func (w *world) view(t *testing.T, st style) string {
	t.Helper()
	s, _ := w.fakeSession(t)
	var out bytes.Buffer
	g := &getter{s: s, out: &out, style: st, now: now}
	if err := g.once(context.Background(), "vllm"); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// canaryAt sets the status of a stepped rollout from revision 1 (hash h1, stable) to
// revision 2 (hash h2), paused at its second step of three.
func (w *world) canaryAt(h1, h2 string) {
	half := intstr.FromString("50%")
	w.dgd.Spec.Rollout = &v1alpha1.RolloutSpec{Steps: []v1alpha1.RolloutStep{{Partition: &half}, {Pause: &v1alpha1.RolloutPause{}}, {}}}
	st := &w.dgd.Status
	st.CurrentRevision, st.UpdateRevision, st.UpdateWorkerHash, st.UpdateRevisionNumber = "vllm-"+h1+"-1", "vllm-"+h2+"-2", h2, 2
	st.RollingUpdate = &v1alpha1.RollingUpdateStatus{Phase: v1alpha1.RolloutPaused, Reason: "Paused",
		Message: "step 2/3: paused until promoted", CurrentStepIndex: ptr.To[int32](1), CurrentStepKind: v1alpha1.StepPause, Attempt: 1}
	w.revision(1, h1, "kubectl apply -f disagg.yaml")
	w.revision(2, h2, "set image vllm:v2")
}

func TestGetDeployment(t *testing.T) {
	w := newWorld(v1alpha1.BackendAuto, map[string]int32{"decode": 1, "prefill": 1}, 2)
	w.canaryAt("aaaa1111", "bbbb2222")
	w.deployment("Frontend", "", 1, 1)
	w.status("Frontend", 0, "vllm-frontend", 1, 1)
	for _, svc := range []string{"decode", "prefill"} {
		w.deployment(svc, "aaaa1111", 1, 1)
		w.deployment(svc, "bbbb2222", 1, 0)
		w.status(svc, 2, backends.WorkloadName("vllm", svc, "bbbb2222"), 1, 0)
		w.status(svc, 1, backends.WorkloadName("vllm", svc, "aaaa1111"), 1, 1)
	}
	w.dgd.Status.Ready, w.dgd.Status.Replicas, w.dgd.Status.UpdatedReplicas, w.dgd.Status.ReadyReplicas = "3/5", 4, 2, 2
	w.dgd.Status.Restart = &v1alpha1.RestartStatus{ObservedID: "r1", Phase: v1alpha1.RestartPhaseRestarting, InProgress: []string{"decode", "prefill"}}
	w.dgd.Status.RollingUpdate.Analyses = []v1alpha1.AnalysisStatus{{Step: 0, Phase: v1alpha1.AnalysisSuccessful, Metrics: []v1alpha1.MetricStatus{
		{Name: "ttft-ratio", Phase: v1alpha1.AnalysisSuccessful, Successful: 1, Measurements: []v1alpha1.Measurement{{Phase: v1alpha1.MeasurementSuccessful, Value: "1.0000000000000002"}}}}}}
	expectGolden(t, "get-deployment", w.view(t, plainStyle))
	expectGolden(t, "get-deployment-terminal", w.view(t, terminalStyle))
}

func TestGetLeaderWorkerSet(t *testing.T) {
	w := newWorld(v1alpha1.BackendAuto, map[string]int32{"decode": 2}, 2)
	w.canaryAt("aaaa1111", "bbbb2222")
	w.dgd.Status.RollingUpdate.CurrentStepIndex, w.dgd.Status.RollingUpdate.CurrentStepKind = ptr.To[int32](0), v1alpha1.StepPartition
	w.dgd.Status.RollingUpdate.Phase, w.dgd.Status.RollingUpdate.Reason, w.dgd.Status.RollingUpdate.Message = v1alpha1.RolloutInProgress, "RollingUpdate", "step 1/3: moving to partition 50%"
	w.deployment("Frontend", "", 1, 1)
	w.status("Frontend", 0, "vllm-frontend", 1, 1)
	w.leaderWorkerSet("decode", "aaaa1111", 1, 2, 1)
	w.leaderWorkerSet("decode", "bbbb2222", 1, 2, 0)
	w.status("decode", 2, backends.GangSetName("vllm", "decode", "bbbb2222"), 1, 0)
	w.status("decode", 1, backends.GangSetName("vllm", "decode", "aaaa1111"), 1, 1)
	for _, ss := range w.dgd.Status.Services {
		ss.WorkloadKind = "LeaderWorkerSet"
	}
	w.dgd.Status.Ready = "2/3"
	expectGolden(t, "get-lws", w.view(t, plainStyle))
}

func TestGetGrove(t *testing.T) {
	w := newWorld(v1alpha1.BackendGrove, map[string]int32{"decode": 2, "prefill": 1}, 2)
	w.canaryAt("aaaa1111", "bbbb2222")
	w.podCliqueSet("vllm-fe", "", 1, 1, "Frontend")
	w.podCliqueSet("vllm", "aaaa1111", 1, 1, "decode", "prefill")
	w.podCliqueSet("vllm-1", "bbbb2222", 1, 0, "decode", "prefill")
	for _, svc := range []string{"decode", "prefill"} {
		w.status(svc, 2, "vllm-1", 1, 0)
		w.status(svc, 1, "vllm", 1, 1)
	}
	w.status("Frontend", 0, "vllm-fe", 1, 1)
	w.dgd.Status.Ready = "3/5"
	expectGolden(t, "get-grove", w.view(t, plainStyle))
}

func TestGetAbortedCanary(t *testing.T) {
	w := newWorld(v1alpha1.BackendAuto, map[string]int32{"decode": 1}, 2)
	w.canaryAt("aaaa1111", "bbbb2222")
	ru := w.dgd.Status.RollingUpdate
	ru.Phase, ru.Reason, ru.Message = v1alpha1.RolloutAborted, v1alpha1.ReasonAnalysisFailed, `step 3/3: metric "error-rate" failed; every worker is back on revision 1`
	ru.CurrentStepIndex, ru.CurrentStepKind = ptr.To[int32](2), v1alpha1.StepAnalysis
	ru.Abort = &v1alpha1.AbortStatus{Reason: v1alpha1.ReasonAnalysisFailed, StableRevision: "vllm-aaaa1111-1", StableRevisionNumber: 1}
	ru.Analyses = []v1alpha1.AnalysisStatus{{Step: 2, Phase: v1alpha1.AnalysisFailed, Metrics: []v1alpha1.MetricStatus{
		{Name: "error-rate", Phase: v1alpha1.AnalysisFailed, Failed: 1, Measurements: []v1alpha1.Measurement{{Phase: v1alpha1.MeasurementFailed, Value: "0.30000000000000004"}}}}}}
	w.deployment("Frontend", "", 1, 1)
	w.status("Frontend", 0, "vllm-frontend", 1, 1)
	w.deployment("decode", "aaaa1111", 2, 2)
	w.deployment("decode", "bbbb2222", 0, 0)
	p := w.pod("vllm-decode-bbbb2222-5d8f7c9b6-zz4x2", backends.Labels(w.dgd, "decode", "bbbb2222"), "ReplicaSet", "vllm-decode-bbbb2222-5d8f7c9b6", false)
	p.Labels["pod-template-hash"] = "5d8f7c9b6"
	p.DeletionTimestamp, p.Finalizers = ptr.To(metav1.NewTime(t0.Add(9*time.Minute))), []string{"test/keep"}
	w.status("decode", 1, backends.WorkloadName("vllm", "decode", "aaaa1111"), 2, 2)
	w.status("decode", 2, backends.WorkloadName("vllm", "decode", "bbbb2222"), 0, 0)
	w.dgd.Status.Ready = "3/3"
	expectGolden(t, "get-aborted", w.view(t, plainStyle))
	expectGolden(t, "get-aborted-terminal", w.view(t, terminalStyle))
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until out holds want n times (a watch's views are written whole).
func waitFor(t *testing.T, out *syncBuffer, want string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(out.String(), want) < n {
		if time.Now().After(deadline) {
			t.Fatalf("no %d× %q after 10s; output:\n%s", n, want, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGetWatch follows a canary through a bounded sequence of changes, each to another
// kind that "get --watch" watches: a pod turns ready, the DGD's status moves to the next
// step, the old revision's Deployment scales down. Each change draws one more view
// (the test waits for it before the next change), an event that changes nothing shown
// draws none, and cancelling the context (Ctrl-C) ends the watch without an error.
func TestGetWatch(t *testing.T) {
	w := newWorld(v1alpha1.BackendAuto, map[string]int32{"decode": 1}, 1)
	w.canaryAt("aaaa1111", "bbbb2222")
	w.deployment("decode", "aaaa1111", 1, 1)
	w.deployment("decode", "bbbb2222", 1, 0)
	w.status("decode", 2, "vllm-decode-bbbb2222", 1, 0)
	w.status("decode", 1, "vllm-decode-aaaa1111", 1, 1)
	w.dgd.Status.Ready = "1/1"
	s, c := w.fakeSession(t)
	out := &syncBuffer{}
	g := &getter{s: s, out: out, style: plainStyle, now: now}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.watch(ctx, "vllm") }()
	bg := context.Background()
	waitFor(t, out, "Name:", 1)

	// A label no view shows: an event, and no new view.
	dgd := &v1alpha1.DynamoGraphDeployment{}
	must(t, c.Get(bg, client.ObjectKey{Namespace: "default", Name: "vllm"}, dgd))
	dgd.Labels = map[string]string{"team": "inference"}
	must(t, c.Update(bg, dgd))

	var pods corev1.PodList
	must(t, c.List(bg, &pods, client.MatchingLabels{v1alpha1.LabelWorkerHash: "bbbb2222"}))
	pod := &pods.Items[0]
	pod.Status.Conditions[0].Status, pod.Status.ContainerStatuses[0].Ready = corev1.ConditionTrue, true
	must(t, c.Status().Update(bg, pod))
	waitFor(t, out, "Name:", 2)

	must(t, c.Get(bg, client.ObjectKey{Namespace: "default", Name: "vllm"}, dgd))
	ru := dgd.Status.RollingUpdate
	ru.Phase, ru.Reason, ru.Message, ru.CurrentStepIndex, ru.CurrentStepKind = v1alpha1.RolloutInProgress, "RollingUpdate", "step 3/3", ptr.To[int32](3), ""
	must(t, c.Status().Update(bg, dgd))
	waitFor(t, out, "Name:", 3)

	old := &appsv1.Deployment{}
	must(t, c.Get(bg, client.ObjectKey{Namespace: "default", Name: "vllm-decode-aaaa1111"}, old))
	old.Spec.Replicas = ptr.To[int32](0)
	must(t, c.Update(bg, old))
	waitFor(t, out, "Name:", 4)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("watch ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not end after its context was cancelled")
	}
	expectGolden(t, "get-watch", out.String())
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestTrafficLines prints status.traffic and status.cohorts as kubectl dgd get does.
func TestTrafficLines(t *testing.T) {
	w30, w70, in := int32(30), int32(70), int64(2)
	d := &v1alpha1.DynamoGraphDeployment{Status: v1alpha1.DynamoGraphDeploymentStatus{
		Traffic: &v1alpha1.TrafficStatus{Provider: v1alpha1.TrafficProxy, Entry: []string{"g-frontend"}, InEffect: false, Message: "pod g-frontend-proxy-x reports version 3, not 4"},
		Cohorts: []v1alpha1.CohortStatus{
			{Revision: 3, Hash: "0ebb3505", Weight: 30, WeightInEffect: &w30, FrontendReplicas: 1, FrontendReadyReplicas: 1, RoutableWorkers: 2, Routable: true, HeaderRoute: true},
			{Revision: 2, Hash: "6101c065", Weight: 70, WeightInEffect: &w70, FrontendReplicas: 1, FrontendReadyReplicas: 1, RoutableWorkers: 6, Routable: true, InFlight: &in},
		}}}
	want := []string{
		"Proxy through g-frontend: not in effect yet: pod g-frontend-proxy-x reports version 3, not 4",
		"revision 3: weight 30% (in effect 30%), frontends 1/1 ready, 2 routable workers, header route",
		"revision 2: weight 70% (in effect 70%), frontends 1/1 ready, 6 routable workers, 2 in flight",
	}
	if diff := cmp.Diff(want, trafficLines(d)); diff != "" {
		t.Errorf("trafficLines (-want +got):\n%s", diff)
	}
	if got := trafficLines(&v1alpha1.DynamoGraphDeployment{}); got != nil {
		t.Errorf("without cohorts: %q, want nothing", got)
	}
}
