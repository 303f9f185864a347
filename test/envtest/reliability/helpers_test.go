package reliability_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/revisions"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/test/invariants"
)

// specHash is the worker hash of the DGD's spec: the update revision the operator
// must report once it has observed the spec.
func specHash(d *v1alpha1.DynamoGraphDeployment) string {
	return revisions.Hash(revisions.NewWorkerTemplate(d), d.Status.CollisionCount)
}

// waitSettled is harness.Env.WaitSettled (which also requires the status to come from a
// pass that synced the spec's worker template).
func waitSettled(ns, name string) (harness.Snapshot, error) { return env.WaitSettled(ctx, ns, name) }

// drive is harness.Env.Drive: it tolerates a failed pass retrying by itself.
func drive(ns, name string, grow int32, maxSteps int, done func(harness.Snapshot) bool) ([]harness.Snapshot, error) {
	return env.Drive(ctx, ns, name, grow, maxSteps, done)
}

// deploy creates a DGD and drives it to its first completed revision.
func deploy(obj *v1alpha1.DynamoGraphDeployment) harness.Snapshot {
	GinkgoHelper()
	Expect(env.Client.Create(ctx, obj)).To(Succeed())
	steps, err := drive(obj.Namespace, obj.Name, -1, 40, harness.Snapshot.Completed)
	Expect(err).NotTo(HaveOccurred())
	return steps[len(steps)-1]
}

// update applies a change to the live DGD.
func update(ns, name string, change func(*v1alpha1.DynamoGraphDeployment)) {
	GinkgoHelper()
	Eventually(func() error {
		var d v1alpha1.DynamoGraphDeployment
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
			return err
		}
		change(&d)
		return env.Client.Update(ctx, &d)
	}).Should(Succeed())
}

func controllerRevisions(ns string) []appsv1.ControllerRevision {
	GinkgoHelper()
	var revs appsv1.ControllerRevisionList
	Expect(env.Client.List(ctx, &revs, client.InNamespace(ns))).To(Succeed())
	slices.SortFunc(revs.Items, func(a, b appsv1.ControllerRevision) int { return int(a.Revision - b.Revision) })
	return revs.Items
}

// deploymentsInNamespace lists every Deployment of a namespace, labelled or not.
func deploymentsInNamespace(ns string) []appsv1.Deployment {
	GinkgoHelper()
	var list appsv1.DeploymentList
	Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	slices.SortFunc(list.Items, func(a, b appsv1.Deployment) int { return strings.Compare(a.Name, b.Name) })
	return list.Items
}

func getDeployment(ns, name string) *appsv1.Deployment {
	GinkgoHelper()
	var d appsv1.Deployment
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
	return &d
}

// stripLabels removes a Deployment's labels (all of them, or only the worker hash; with
// all, the annotations too), as a hand edit with kubectl replace would.
func stripLabels(ns, name string, onlyHash bool) {
	GinkgoHelper()
	Eventually(func() error {
		d := getDeployment(ns, name)
		if onlyHash {
			delete(d.Labels, v1alpha1.LabelWorkerHash)
		} else {
			d.Labels, d.Annotations = nil, nil
		}
		return env.Client.Update(ctx, d)
	}).Should(Succeed())
}

// surgeWatch checks the surge rule on every Deployment event of one DGD, not only at
// settled steps: decreases are written before increases, so no failed write may leave
// more replicas set than R + maxSurge.
type surgeWatch struct {
	mu         sync.Mutex
	violations []string
	events     int
	specs      map[string][]int32 // every spec.replicas seen, per Deployment
	cancel     context.CancelFunc
	done       chan struct{}
}

func watchSurge(ns, name string) *surgeWatch {
	GinkgoHelper()
	var dgd v1alpha1.DynamoGraphDeployment
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &dgd)).To(Succeed())
	services := invariants.ServicesOf(&dgd)
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: app.NewScheme()})
	Expect(err).NotTo(HaveOccurred())
	wctx, cancel := context.WithCancel(ctx)
	w, err := wc.Watch(wctx, &appsv1.DeploymentList{}, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelGraph: name})
	Expect(err).NotTo(HaveOccurred())
	sw := &surgeWatch{cancel: cancel, done: make(chan struct{}), specs: map[string][]int32{}}
	go func() {
		defer close(sw.done)
		defer w.Stop()
		live := map[string]invariants.Workload{}
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok || d.Labels[v1alpha1.LabelWorkerHash] == "" {
				continue
			}
			if ev.Type == watch.Deleted {
				delete(live, d.Name)
			} else {
				live[d.Name] = invariants.Workload{Service: d.Labels[v1alpha1.LabelService], Hash: d.Labels[v1alpha1.LabelWorkerHash],
					Spec: ptr.Deref(d.Spec.Replicas, 1), Ready: d.Status.AvailableReplicas}
			}
			ws := make([]invariants.Workload, 0, len(live))
			for _, w := range live {
				ws = append(ws, w)
			}
			v := invariants.CheckSurge(services, ws)
			sw.mu.Lock()
			sw.events++
			sw.specs[d.Name] = append(sw.specs[d.Name], ptr.Deref(d.Spec.Replicas, 1))
			for _, x := range v {
				sw.violations = append(sw.violations, fmt.Sprintf("%s after %s %s", x, ev.Type, d.Name))
			}
			sw.mu.Unlock()
		}
	}()
	return sw
}

// stop ends the watch and returns what it saw.
func (sw *surgeWatch) stop() (events int, violations []string) {
	sw.cancel()
	<-sw.done
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.events, sw.violations
}

// specsOf returns every spec.replicas seen on one Deployment so far.
func (sw *surgeWatch) specsOf(name string) []int32 {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return slices.Clone(sw.specs[name])
}

// expectNoSurge stops the watch and fails on any violation.
func (sw *surgeWatch) expectNoSurge() {
	GinkgoHelper()
	events, v := sw.stop()
	Expect(events).To(BeNumerically(">", 0))
	Expect(v).To(BeEmpty(), "surge exceeded between settled steps")
}

// statusLog records every version of one DGD the API server sends on a watch, so a
// spec can look at the transient statuses a poller would miss.
type statusLog struct {
	mu       sync.Mutex
	versions []v1alpha1.DynamoGraphDeployment
	cancel   context.CancelFunc
	done     chan struct{}
}

func recordDGD(ns, name string) *statusLog {
	GinkgoHelper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: app.NewScheme()})
	Expect(err).NotTo(HaveOccurred())
	wctx, cancel := context.WithCancel(ctx)
	w, err := wc.Watch(wctx, &v1alpha1.DynamoGraphDeploymentList{}, client.InNamespace(ns))
	Expect(err).NotTo(HaveOccurred())
	l := &statusLog{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		defer w.Stop()
		for ev := range w.ResultChan() {
			if d, ok := ev.Object.(*v1alpha1.DynamoGraphDeployment); ok && d.Name == name {
				l.mu.Lock()
				l.versions = append(l.versions, *d.DeepCopy())
				l.mu.Unlock()
			}
		}
	}()
	return l
}

// stop ends the watch and returns every version seen.
func (l *statusLog) stop() []v1alpha1.DynamoGraphDeployment {
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.versions
}
