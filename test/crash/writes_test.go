//go:build linux

package crash

import (
	"context"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/cmd/manager/app"
)

// writeCounter counts the operator's writes as the API server reports them, cluster
// wide: Deployments created, deleted or given a new generation (a scale or a template
// change: only the operator changes a Deployment's spec), ControllerRevisions created,
// renumbered or deleted, and DGD status writes (a DGD update that keeps its generation).
// The chaos monkey kills right after the n-th write to land inside a pass, between two
// of its writes.
type writeCounter struct {
	mu   sync.Mutex
	n    int
	wake chan struct{} // closed (and replaced) at every write
}

// changed returns a channel closed at the next write.
func (w *writeCounter) changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wake
}

func (w *writeCounter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

func (w *writeCounter) add() {
	w.mu.Lock()
	w.n++
	close(w.wake)
	w.wake = make(chan struct{})
	w.mu.Unlock()
}

// countWrites watches until ctx ends.
func (e *env) countWrites(ctx context.Context) (*writeCounter, error) {
	c, err := client.NewWithWatch(e.cl.Config, client.Options{Scheme: app.NewScheme()})
	if err != nil {
		return nil, err
	}
	w := &writeCounter{wake: make(chan struct{})}
	for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &appsv1.ControllerRevisionList{}, &v1alpha1.DynamoGraphDeploymentList{}} {
		go w.watch(ctx, c, list)
	}
	return w, nil
}

// watch lists then watches one kind from the list's resourceVersion, relisting when the
// watch ends, and counts the writes it sees.
func (w *writeCounter) watch(ctx context.Context, c client.WithWatch, list client.ObjectList) {
	generation := map[types.UID]int64{}
	for ctx.Err() == nil {
		if err := c.List(ctx, list); err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		lm, _ := list.(metav1.ListMetaAccessor)
		wi, err := c.Watch(ctx, list, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: lm.GetListMeta().GetResourceVersion()}})
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for ev := range wi.ResultChan() {
			o, ok := ev.Object.(client.Object)
			if !ok {
				continue
			}
			_, isRev := o.(*appsv1.ControllerRevision)
			_, isDGD := o.(*v1alpha1.DynamoGraphDeployment)
			switch ev.Type {
			case watch.Added:
				generation[o.GetUID()] = o.GetGeneration()
				if !isDGD {
					w.add()
				}
			case watch.Deleted:
				delete(generation, o.GetUID())
				if !isDGD {
					w.add()
				}
			case watch.Modified:
				old, seen := generation[o.GetUID()]
				generation[o.GetUID()] = o.GetGeneration()
				switch {
				case isRev:
					w.add()
				case isDGD && seen && old == o.GetGeneration():
					w.add() // a status write
				case !isDGD && seen && old != o.GetGeneration():
					w.add() // a spec write
				}
			}
		}
		wi.Stop()
	}
}
