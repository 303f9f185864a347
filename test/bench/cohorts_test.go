package bench

// Cohorts: a Dynamo upgrade (the frontend's, the prefill's and the decode's images
// bumped in one edit) of a graph whose cohorts run (spec.rollout.frontends Auto, the
// default: a frontend per revision, client traffic split between them through the
// proxy), against the same graph and upgrade with spec.rollout.frontends Shared (one
// frontend updated in place, as Dynamo runs it), in one run on the local control plane
// (KWOK pod-ready delay 1 s, 4 nodes of 8 GPUs), the operator in this process as in
// P1, and the proxy's pods run for real (test/proxypod: the agent from this tree's
// manager binary under the rendered ServiceAccount, Debian's HAProxy), so the cohort arm
// waits on what its agents apply and report (issue 36 section 4; target: the cohort
// arm's time <= 1.15 of the shared arm's).
//
//	go test ./test/bench/ -run '^$' -bench Cohorts -benchtime=1x -count=2 -timeout 30m
//
// Each round rolls, in each arm, two upgrades of one graph (frontend 1, prefill 4,
// decode 2, maxSurge 1, maxUnavailable 0): 1.6.0 to 1.7.0, the first, which in the
// cohort arm starts the cohorts (the prelude: the running revision's cohort frontend
// and the proxy made, the shared frontend removed), and 1.7.0 to 1.8.0 between two
// cohorts. Each is timed from the write of the DGD to the status kubectl dgd rollout
// status waits for (revision n Completed, every component's replicas ready), read by a
// watch of the DGD in its storage version; the arms alternate which goes first from
// round to round. Reported: each arm's time of each upgrade and their ratios
// ("ratio" the first upgrade's, "ratio-second" the second's).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/conversion"
	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/test/opproc"
	"github.com/dgd-rollout/operator/test/proxypod"
)

// The cohort benchmark's graph: prefill and decode replicas.
const (
	cohortsPrefill = 4
	cohortsDecode  = 2
)

func BenchmarkCohortsVsShared(b *testing.B) {
	if _, err := os.Stat(filepath.Join(cluster.RepoRoot(), "bin", "kube-controller-manager")); err != nil {
		b.Skip("bin/kube-controller-manager is missing: run make cluster-bins")
	}
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		b.Fatal("haproxy not found: the proxy's pods run Debian's (make test installs it)")
	}
	ctrl.SetLogger(logr.Discard())
	ctx := context.Background()
	dir := b.TempDir()
	built := make(chan error, 1)
	var manager string
	go func() {
		var err error
		manager, err = opproc.Build(cluster.RepoRoot(), dir)
		built <- err
	}()
	cl, err := cluster.Start(ctx, cluster.Options{Nodes: 4, GPUsPerNode: 8, PodReadyDelay: PodReadyDelay})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cl.Stop() }()
	if err := cl.InstallCRDs(ctx, filepath.Join(cluster.RepoRoot(), "config", "crd", "bases")); err != nil {
		b.Fatal(err)
	}
	if err := cluster.InstallMissingCRDs(ctx, cl.Config, filepath.Join(cluster.RepoRoot(), "config", "crd", "dynamo")); err != nil {
		b.Fatal(err)
	}
	if err := <-built; err != nil {
		b.Fatal(err)
	}
	runner, err := proxypod.Run(ctx, proxypod.RunnerOptions{Config: cl.Config, Manager: manager, HAProxy: haproxy})
	if err != nil {
		b.Fatal(err)
	}
	defer runner.Stop()
	k8s, err := client.NewWithWatch(cl.Config, client.Options{Scheme: app.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	startOperator(b, cl.Config)
	for i := 0; i < b.N; i++ {
		cohortsRounds++
		arms := []v1alpha1.FrontendMode{v1alpha1.FrontendsShared, v1alpha1.FrontendsAuto}
		if cohortsRounds%2 == 0 {
			arms[0], arms[1] = arms[1], arms[0]
		}
		took := map[v1alpha1.FrontendMode]upgrades{}
		for _, mode := range arms {
			took[mode] = rollUpgrades(b, k8s, fmt.Sprintf("cohorts-%d-%s", i, strings.ToLower(string(mode))), mode)
		}
		if errs := runner.Errors(); len(errs) > 0 {
			b.Fatalf("the proxy's pods: %v", errs)
		}
		shared, cohorts := took[v1alpha1.FrontendsShared], took[v1alpha1.FrontendsAuto]
		b.ReportMetric(shared.took[0].Seconds(), "shared-s")
		b.ReportMetric(cohorts.took[0].Seconds(), "cohorts-s")
		b.ReportMetric(cohorts.took[0].Seconds()/shared.took[0].Seconds(), "ratio")
		b.ReportMetric(shared.took[1].Seconds(), "shared2-s")
		b.ReportMetric(cohorts.took[1].Seconds(), "cohorts2-s")
		b.ReportMetric(cohorts.took[1].Seconds()/shared.took[1].Seconds(), "ratio-second")
		b.ReportMetric(cohorts.firstWorker[0].Seconds(), "cohorts-prelude-s")
		fmt.Printf("Cohorts (frontend 1, prefill %d, decode %d, maxSurge 1, maxUnavailable 0, pod-ready delay %s; %s first; %d proxy pods run so far):\n"+
			"    Dynamo 1.6.0 -> 1.7.0: Shared %.2fs, cohorts through the proxy (the prelude included) %.2fs, ratio %.3f (target <= 1.15)\n"+
			"        the new revision's first worker workload after %.2fs (Shared) and %.2fs (cohorts: the prelude)\n"+
			"    Dynamo 1.7.0 -> 1.8.0: Shared %.2fs, cohort to cohort %.2fs, ratio %.3f\n"+
			"        the new revision's first worker workload after %.2fs (Shared) and %.2fs (cohorts)\n",
			cohortsPrefill, cohortsDecode, PodReadyDelay, arms[0], runner.Started(),
			shared.took[0].Seconds(), cohorts.took[0].Seconds(), cohorts.took[0].Seconds()/shared.took[0].Seconds(),
			shared.firstWorker[0].Seconds(), cohorts.firstWorker[0].Seconds(),
			shared.took[1].Seconds(), cohorts.took[1].Seconds(), cohorts.took[1].Seconds()/shared.took[1].Seconds(),
			shared.firstWorker[1].Seconds(), cohorts.firstWorker[1].Seconds())
	}
}

// cohortsRounds counts the rounds of this process (-count runs the benchmark anew): the
// arm that goes first alternates from one to the next.
var cohortsRounds int

// upgrades is what one arm measured of its two upgrades: each one's time, and when the
// update revision's first worker workload was seen after the write.
type upgrades struct {
	took, firstWorker [2]time.Duration
}

// rollUpgrades creates the graph in namespace ns with frontends mode, waits until it is
// rolled out, times two Dynamo upgrades (1.6.0 to 1.7.0, 1.7.0 to 1.8.0), then deletes
// it and waits for its pods to go (the next arm runs beside no more pods than this one).
func rollUpgrades(b *testing.B, k8s client.WithWatch, ns string, mode v1alpha1.FrontendMode) upgrades {
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	seen := seeDeployments(b, k8s, ns)
	c := conversion.NewWithWatch(k8s) // the DGD made and changed in v1beta1, Dynamo's current API
	obj := harness.NewDGD(ns, "llm").Disagg(cohortsPrefill, cohortsDecode, dynamoImage("1.6.0")).Rollout("1", "0").Obj()
	obj.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = dynamoImage("1.6.0")
	obj.Spec.Rollout.Frontends = mode
	for _, name := range obj.WorkerServiceNames() {
		obj.Spec.Services[name].Resources = &v1alpha1.Resources{Limits: &v1alpha1.ResourceItem{GPU: "1"}}
	}
	if err := c.Create(ctx, obj); err != nil {
		b.Fatal(err)
	}
	watchUntil(b, c, &v1beta1.DynamoGraphDeploymentList{}, ns, "llm", func(o runtime.Object) bool { return upgraded(o.(*v1beta1.DynamoGraphDeployment), 1) })
	var out upgrades
	for i, v := range []string{"1.7.0", "1.8.0"} {
		var live v1alpha1.DynamoGraphDeployment
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), &live); err != nil {
			b.Fatal(err)
		}
		for _, name := range live.ServiceNames() {
			live.Spec.Services[name].ExtraPodSpec.MainContainer.Image = dynamoImage(v)
		}
		begin := time.Now()
		if err := c.Update(ctx, &live); err != nil {
			b.Fatal(err)
		}
		rev := int64(i + 2)
		var hash string
		watchUntil(b, c, &v1beta1.DynamoGraphDeploymentList{}, ns, "llm", func(o runtime.Object) bool {
			d := o.(*v1beta1.DynamoGraphDeployment)
			hash = d.Status.UpdateWorkerHash
			return upgraded(d, rev)
		})
		out.took[i] = time.Since(begin)
		out.firstWorker[i] = seen.first(hash).Sub(begin)
	}
	if err := k8s.Delete(ctx, &v1beta1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llm"}}); err != nil {
		b.Fatal(err)
	}
	waitNoPods(b, k8s, client.InNamespace(ns))
	return out
}

// deploymentsSeen records when a watch of a namespace's Deployments first saw each
// worker Deployment (not a frontend's), by worker hash.
type deploymentsSeen struct {
	mu        sync.Mutex
	firstSeen map[string]time.Time
}

// seeDeployments watches the Deployments of ns until the benchmark ends.
func seeDeployments(b *testing.B, k8s client.WithWatch, ns string) *deploymentsSeen {
	s := &deploymentsSeen{firstSeen: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	w, err := k8s.Watch(ctx, &appsv1.DeploymentList{}, client.InNamespace(ns))
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			hash := ""
			if ok {
				hash = d.Labels[v1alpha1.LabelWorkerHash]
			}
			if hash == "" || d.Labels[v1alpha1.LabelComponentType] == v1alpha1.ComponentTypeFrontend {
				continue
			}
			s.mu.Lock()
			if _, ok := s.firstSeen[hash]; !ok {
				s.firstSeen[hash] = time.Now()
			}
			s.mu.Unlock()
		}
	}()
	return s
}

// first is when a worker Deployment of hash was first seen (zero: never).
func (s *deploymentsSeen) first(hash string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.firstSeen[hash]
}

// dynamoImage is Dynamo's vLLM runtime image at a version.
func dynamoImage(version string) string { return "nvcr.io/nvidia/ai-dynamo/vllm-runtime:" + version }

// upgraded: revision rev rolled out (Completed, for the DGD's generation) with every
// component's desired replicas ready, what kubectl dgd rollout status waits for.
func upgraded(d *v1beta1.DynamoGraphDeployment, rev int64) bool {
	ru := d.Status.RollingUpdate
	if d.Status.UpdateRevisionNumber != rev || ru == nil || ru.Phase != v1alpha1.RolloutCompleted || d.Status.ObservedGeneration != d.Generation {
		return false
	}
	want := map[string]int32{"Frontend": 1, "prefill": cohortsPrefill, "decode": cohortsDecode}
	for name, n := range want {
		if d.Status.Components[name].ReadyReplicas != n || d.Status.Components[name].Replicas != n {
			return false
		}
	}
	return true
}
