package lws_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/lws"
)

// gpu is the extended resource the fake nodes offer.
const gpu corev1.ResourceName = "nvidia.com/gpu"

// TestLeaderWorkerSetOnLocalCluster runs the real LWS controllers and webhooks
// against a real control plane: an LWS of 2 groups x (leader + 1 worker) gets 4
// labelled, Ready pods and readyReplicas 2; scaling to 1 removes the second group;
// Stop deletes the webhook configurations.
func TestLeaderWorkerSetOnLocalCluster(t *testing.T) {
	if _, err := os.Stat(filepath.Join(cluster.RepoRoot(), "bin", "kube-controller-manager")); err != nil {
		t.Skipf("local control plane binaries missing (%v); build them into bin/", err)
	}
	crdDir, err := lws.CRDDir()
	if err != nil {
		t.Fatal(err)
	}
	log := zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.InfoLevel))
	ctrl.SetLogger(log)

	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
	defer cancel()
	begin := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{Nodes: 2, PodReadyDelay: time.Second})
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("cluster stop: %v", err)
		}
	})
	t.Logf("cluster up in %s", time.Since(begin).Round(time.Millisecond))
	if got := lws.CRDPaths(); len(got) != 1 || got[0] != crdDir {
		t.Fatalf("CRDPaths() = %v, want [%s]", got, crdDir)
	}
	if err := c.InstallCRDs(ctx, lws.CRDPaths()...); err != nil {
		t.Fatalf("install LWS CRDs: %v", err)
	}

	begin = time.Now()
	r, err := lws.Start(ctx, lws.Options{Config: c.Config, Log: log.WithName("lws")})
	if err != nil {
		t.Fatalf("lws.Start: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = r.Stop()
		}
	})
	t.Logf("LWS runner up in %s (%s)", time.Since(begin).Round(time.Millisecond), r.URL)

	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = lwsv1.AddToScheme(scheme)
	k, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	checkWebhookConfigurations(ctx, t, k, r)

	// Create: every field LWS's defaulting webhook (or CRD default) would set is set.
	want := newLWS("demo", 2, 2)
	obj := want.DeepCopy()
	if err := k.Create(ctx, obj); err != nil {
		t.Fatalf("create LWS: %v", err)
	}
	created := time.Now()
	// The defaulting webhook must have had nothing to add.
	if !equality.Semantic.DeepEqual(defaultedFields(want), defaultedFields(obj)) {
		t.Errorf("LWS changed by admission:\nsent   %+v\nstored %+v", defaultedFields(want), defaultedFields(obj))
	}

	waitFor(ctx, t, "4 labelled Ready pods and readyReplicas 2", func() error {
		if err := checkGroups(ctx, k, "demo", 2, 2); err != nil {
			return err
		}
		return checkStatus(ctx, k, "demo", 2)
	})
	t.Logf("LWS 2x2 Ready %s after create", time.Since(created).Round(time.Millisecond))

	// Scale to 1: the second group (leader demo-1 and its worker StatefulSet's pod
	// demo-1-1) goes away.
	scaled := time.Now()
	if err := k.Patch(ctx, &lwsv1.LeaderWorkerSet{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default"}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":1}}`))); err != nil {
		t.Fatalf("scale LWS: %v", err)
	}
	waitFor(ctx, t, "group 1 gone, readyReplicas 1", func() error {
		if err := checkGroups(ctx, k, "demo", 1, 2); err != nil {
			return err
		}
		return checkStatus(ctx, k, "demo", 1)
	})
	t.Logf("scaled to 1 in %s", time.Since(scaled).Round(time.Millisecond))

	// Stop deletes the webhook configurations.
	stopped = true
	begin = time.Now()
	if err := r.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("Stop took %s", time.Since(begin).Round(time.Millisecond))
	assertNoWebhookConfigurations(ctx, t, k)

	// A killed run's leftovers (pointing at a dead port) are removed by
	// CleanupStaleWebhooks ...
	createStale := func() {
		t.Helper()
		m, v := lws.WebhookConfigurations(r.URL, r.CABundle)
		for _, o := range []client.Object{m, v} {
			if err := k.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	createStale()
	if err := lws.CleanupStaleWebhooks(ctx, c.Config); err != nil {
		t.Fatalf("CleanupStaleWebhooks: %v", err)
	}
	assertNoWebhookConfigurations(ctx, t, k)

	// ... and by Start, which then works in the same process again: scaling back
	// to 2 brings group 1 back, labelled and Ready.
	createStale()
	begin = time.Now()
	r2, err := lws.Start(ctx, lws.Options{Config: c.Config, Log: log.WithName("lws2")})
	if err != nil {
		t.Fatalf("second lws.Start: %v", err)
	}
	t.Cleanup(func() { _ = r2.Stop() })
	t.Logf("second LWS runner up in %s (%s)", time.Since(begin).Round(time.Millisecond), r2.URL)
	checkWebhookConfigurations(ctx, t, k, r2)
	if err := k.Patch(ctx, &lwsv1.LeaderWorkerSet{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default"}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":2}}`))); err != nil {
		t.Fatalf("scale LWS: %v", err)
	}
	waitFor(ctx, t, "group 1 back, readyReplicas 2", func() error {
		if err := checkGroups(ctx, k, "demo", 2, 2); err != nil {
			return err
		}
		return checkStatus(ctx, k, "demo", 2)
	})
	if err := r2.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	assertNoWebhookConfigurations(ctx, t, k)
}

// newLWS is an LWS of replicas groups of size pods (leader + size-1 workers), one
// GPU per pod, with every field LWS defaults set explicitly.
func newLWS(name string, replicas, size int32) *lwsv1.LeaderWorkerSet {
	pod := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "engine",
				Image: "example.com/engine:v1",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{gpu: resource.MustParse("1")},
					Limits:   corev1.ResourceList{gpu: resource.MustParse("1")},
				},
			}},
		},
	}
	return &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: lwsv1.LeaderWorkerSetSpec{
			Replicas:      ptr.To(replicas),
			StartupPolicy: lwsv1.LeaderCreatedStartupPolicy,
			RolloutStrategy: lwsv1.RolloutStrategy{
				Type: lwsv1.RollingUpdateStrategyType,
				RollingUpdateConfiguration: &lwsv1.RollingUpdateConfiguration{
					Partition:      ptr.To[int32](0),
					MaxUnavailable: intstr.FromInt32(1),
					MaxSurge:       intstr.FromInt32(0),
				},
			},
			NetworkConfig: &lwsv1.NetworkConfig{SubdomainPolicy: ptr.To(lwsv1.SubdomainShared)},
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{
				Size:           ptr.To(size),
				RestartPolicy:  lwsv1.RecreateGroupOnPodRestart,
				WorkerTemplate: pod,
			},
		},
	}
}

// defaultedFields are the spec fields LWS's webhook and CRD default.
func defaultedFields(l *lwsv1.LeaderWorkerSet) []any {
	return []any{l.Spec.Replicas, l.Spec.StartupPolicy, l.Spec.RolloutStrategy, l.Spec.NetworkConfig,
		l.Spec.LeaderWorkerTemplate.Size, l.Spec.LeaderWorkerTemplate.RestartPolicy,
		l.Spec.LeaderWorkerTemplate.SubGroupPolicy}
}

// checkGroups checks that exactly groups x size pods of the LWS exist, named,
// labelled and Ready as LWS makes them, bound to a node, each requesting one GPU.
func checkGroups(ctx context.Context, k client.Client, name string, groups, size int) error {
	var pods corev1.PodList
	if err := k.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{lwsv1.SetNameLabelKey: name}); err != nil {
		return err
	}
	want := map[string][2]string{} // pod name -> group index, worker index
	for g := 0; g < groups; g++ {
		want[fmt.Sprintf("%s-%d", name, g)] = [2]string{fmt.Sprint(g), "0"}
		for w := 1; w < size; w++ {
			want[fmt.Sprintf("%s-%d-%d", name, g, w)] = [2]string{fmt.Sprint(g), fmt.Sprint(w)}
		}
	}
	var names []string
	groupKey := map[string]string{}
	for i := range pods.Items {
		p := &pods.Items[i]
		names = append(names, p.Name)
		idx, ok := want[p.Name]
		if !ok {
			return fmt.Errorf("unexpected pod %s (have %v)", p.Name, podNames(pods.Items))
		}
		if p.DeletionTimestamp != nil {
			return fmt.Errorf("pod %s is terminating", p.Name)
		}
		if got := p.Labels[lwsv1.GroupIndexLabelKey]; got != idx[0] {
			return fmt.Errorf("pod %s: %s=%q, want %q", p.Name, lwsv1.GroupIndexLabelKey, got, idx[0])
		}
		if got := p.Labels[lwsv1.WorkerIndexLabelKey]; got != idx[1] {
			return fmt.Errorf("pod %s: %s=%q, want %q", p.Name, lwsv1.WorkerIndexLabelKey, got, idx[1])
		}
		key := p.Labels[lwsv1.GroupUniqueHashLabelKey]
		if key == "" {
			return fmt.Errorf("pod %s: no %s label", p.Name, lwsv1.GroupUniqueHashLabelKey)
		}
		if k, ok := groupKey[idx[0]]; ok && k != key {
			return fmt.Errorf("pod %s: group key %s differs from its group's %s", p.Name, key, k)
		}
		groupKey[idx[0]] = key
		if p.Labels[lwsv1.RevisionKey] == "" {
			return fmt.Errorf("pod %s: no %s label", p.Name, lwsv1.RevisionKey)
		}
		if got := p.Spec.Containers[0].Resources.Requests[gpu]; got.Cmp(resource.MustParse("1")) != 0 {
			return fmt.Errorf("pod %s: GPU request %s", p.Name, got.String())
		}
		if p.Spec.NodeName == "" {
			return fmt.Errorf("pod %s not scheduled", p.Name)
		}
		if !podReady(p) {
			return fmt.Errorf("pod %s not Ready (phase %s)", p.Name, p.Status.Phase)
		}
	}
	if len(pods.Items) != len(want) {
		sort.Strings(names)
		return fmt.Errorf("%d pods %v, want %d", len(pods.Items), names, len(want))
	}
	return nil
}

// checkStatus checks readyReplicas, replicas and the Available condition.
func checkStatus(ctx context.Context, k client.Client, name string, ready int32) error {
	var l lwsv1.LeaderWorkerSet
	if err := k.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &l); err != nil {
		return err
	}
	s := l.Status
	if s.ReadyReplicas != ready || s.Replicas != ready || s.UpdatedReplicas != ready || s.ObservedGeneration != l.Generation {
		return fmt.Errorf("status ready %d replicas %d updated %d observedGeneration %d (generation %d), want %d",
			s.ReadyReplicas, s.Replicas, s.UpdatedReplicas, s.ObservedGeneration, l.Generation, ready)
	}
	if !meta.IsStatusConditionTrue(s.Conditions, string(lwsv1.LeaderWorkerSetAvailable)) {
		return fmt.Errorf("not Available: %+v", s.Conditions)
	}
	return nil
}

func checkWebhookConfigurations(ctx context.Context, t *testing.T, k client.Client, r *lws.Runner) {
	t.Helper()
	var m admissionregistrationv1.MutatingWebhookConfiguration
	if err := k.Get(ctx, client.ObjectKey{Name: lws.MutatingWebhookName}, &m); err != nil {
		t.Fatalf("mutating webhook configuration: %v", err)
	}
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	if err := k.Get(ctx, client.ObjectKey{Name: lws.ValidatingWebhookName}, &v); err != nil {
		t.Fatalf("validating webhook configuration: %v", err)
	}
	urls := map[string]string{}
	for _, w := range m.Webhooks {
		urls[w.Name] = *w.ClientConfig.URL
		if *w.FailurePolicy != admissionregistrationv1.Fail || string(w.ClientConfig.CABundle) != string(r.CABundle) {
			t.Errorf("webhook %s: failurePolicy %s, caBundle matches %v", w.Name, *w.FailurePolicy,
				string(w.ClientConfig.CABundle) == string(r.CABundle))
		}
	}
	for _, w := range v.Webhooks {
		urls[w.Name] = *w.ClientConfig.URL
		if *w.FailurePolicy != admissionregistrationv1.Fail || string(w.ClientConfig.CABundle) != string(r.CABundle) {
			t.Errorf("webhook %s: failurePolicy %s", w.Name, *w.FailurePolicy)
		}
	}
	want := map[string]string{
		"mleaderworkerset.kb.io": r.URL + lws.MutateLeaderWorkerSetPath,
		"mpod.kb.io":             r.URL + lws.MutatePodPath,
		"vleaderworkerset.kb.io": r.URL + lws.ValidateLeaderWorkerSetPath,
		"vpod.kb.io":             r.URL + lws.ValidatePodPath,
	}
	if !equality.Semantic.DeepEqual(urls, want) {
		t.Errorf("webhook URLs %v, want %v", urls, want)
	}
}

func assertNoWebhookConfigurations(ctx context.Context, t *testing.T, k client.Client) {
	t.Helper()
	if err := k.Get(ctx, client.ObjectKey{Name: lws.MutatingWebhookName}, &admissionregistrationv1.MutatingWebhookConfiguration{}); !apierrors.IsNotFound(err) {
		t.Errorf("mutating webhook configuration still there (err %v)", err)
	}
	if err := k.Get(ctx, client.ObjectKey{Name: lws.ValidatingWebhookName}, &admissionregistrationv1.ValidatingWebhookConfiguration{}); !apierrors.IsNotFound(err) {
		t.Errorf("validating webhook configuration still there (err %v)", err)
	}
}

func waitFor(ctx context.Context, t *testing.T, what string, check func() error) {
	t.Helper()
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func podReady(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && cluster.PodReady(p) }

func podNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}
