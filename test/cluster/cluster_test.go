package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/dgd-rollout/operator/test/cluster"
)

// start starts a cluster for t, skipping when the binaries are not built, and
// stops it at cleanup.
func start(t *testing.T, opts cluster.Options) *cluster.Cluster {
	t.Helper()
	if _, err := os.Stat(filepath.Join(cluster.RepoRoot(), "bin", "kube-controller-manager")); err != nil {
		t.Skip("bin/kube-controller-manager missing: run make cluster-bins")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	total, by, err := c.RSS()
	if err != nil {
		t.Fatalf("RSS: %v", err)
	}
	t.Logf("startup %v; RSS %d MiB %v", c.StartupDuration.Round(time.Millisecond), total>>20, mib(by))
	return c
}

func mib(by map[string]int64) string {
	var parts []string
	for name, b := range by {
		parts = append(parts, fmt.Sprintf("%s=%dMiB", name, b>>20))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// podTimes is what a watch saw of one pod, on the local clock.
type podTimes struct {
	added, running, ready time.Time
	node                  string
}

func TestDeploymentOnFakeGPUNodes(t *testing.T) {
	const delay = time.Second
	c := start(t, cluster.Options{Nodes: 2, PodReadyDelay: delay})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(c.Config)

	pods := cs.CoreV1().Pods("default")
	w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: "app=gpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	created := time.Now()
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, gpuDeployment(3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	seen := watchUntilReady(t, w, 3)
	t.Logf("deployment create -> 3 pods Ready: %v", time.Since(created).Round(time.Millisecond))

	nodes := c.NodeNames()
	for name, pt := range seen {
		toReady, runToReady := pt.ready.Sub(pt.added), pt.ready.Sub(pt.running)
		t.Logf("pod %s on %s: created->Ready %v, Running->Ready %v", name, pt.node,
			toReady.Round(time.Millisecond), runToReady.Round(time.Millisecond))
		if !slices.Contains(nodes, pt.node) {
			t.Errorf("pod %s on %q, not a fake node %v", name, pt.node, nodes)
		}
		if pt.running.IsZero() {
			t.Errorf("pod %s never seen Running and not Ready", name)
		}
		if toReady < delay || toReady > delay+10*time.Second {
			t.Errorf("pod %s created->Ready %v, want >= %v (and not far more)", name, toReady, delay)
		}
	}
	deleteAndWaitForGC(ctx, t, cs)
}

// watchUntilReady follows pod events until n distinct pods are Ready.
func watchUntilReady(t *testing.T, w watch.Interface, n int) map[string]*podTimes {
	t.Helper()
	seen := map[string]*podTimes{}
	ready := 0
	for ready < n {
		ev, ok := <-w.ResultChan()
		if !ok {
			t.Fatalf("watch ended with %d/%d pods Ready", ready, n)
		}
		pod, ok := ev.Object.(*corev1.Pod)
		if !ok {
			t.Fatalf("watch: %v", ev.Object)
		}
		pt := seen[pod.Name]
		if pt == nil {
			pt = &podTimes{added: time.Now()}
			seen[pod.Name] = pt
		}
		pt.node = pod.Spec.NodeName
		switch isReady := cluster.PodReady(pod); {
		case isReady && pt.ready.IsZero():
			pt.ready = time.Now()
			ready++
		case !isReady && pod.Status.Phase == corev1.PodRunning && pt.running.IsZero():
			pt.running = time.Now()
		}
	}
	return seen
}

// deleteAndWaitForGC deletes the Deployment and waits for the garbage collector to
// remove its ReplicaSet and pods.
func deleteAndWaitForGC(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	deleted := time.Now()
	if err := cs.AppsV1().Deployments("default").Delete(ctx, "gpu", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sel := metav1.ListOptions{LabelSelector: "app=gpu"}
	for {
		rss, err := cs.AppsV1().ReplicaSets("default").List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		pods, err := cs.CoreV1().Pods("default").List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		if len(rss.Items) == 0 && len(pods.Items) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after deleting the Deployment: %d ReplicaSets, %d pods remain", len(rss.Items), len(pods.Items))
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Logf("deployment delete -> ReplicaSet and pods gone: %v", time.Since(deleted).Round(time.Millisecond))
}

func gpuDeployment(replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": "gpu"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "worker",
					Image: "example.com/worker:v1",
					Resources: corev1.ResourceRequirements{
						Limits: corev1.ResourceList{cluster.GPUResource: resource.MustParse("1")},
					},
				}}},
			},
		},
	}
}

func TestStopKillsEveryRecordedPID(t *testing.T) {
	c := start(t, cluster.Options{KeepWorkDir: true})
	t.Cleanup(func() { _ = os.RemoveAll(c.WorkDir) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	began := time.Now()
	if err := c.InstallCRDs(ctx, filepath.Join(cluster.RepoRoot(), "config", "crd", "bases")); err != nil {
		t.Fatalf("InstallCRDs: %v", err)
	}
	t.Logf("InstallCRDs: %v", time.Since(began).Round(time.Millisecond))

	procs := c.Processes()
	recorded, err := os.ReadFile(filepath.Join(c.WorkDir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if !strings.Contains(string(recorded), fmt.Sprintf("%s %d\n", p.Name, p.PID)) {
			t.Errorf("pids file lacks %s %d:\n%s", p.Name, p.PID, recorded)
		}
	}
	if len(procs) < 5 {
		t.Fatalf("want >= 5 processes, got %v", procs)
	}
	began = time.Now()
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("Stop: %v", time.Since(began).Round(time.Millisecond))
	for _, p := range procs {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", p.PID)); err == nil {
			t.Errorf("%s (pid %d) still exists after Stop", p.Name, p.PID)
		}
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}
