package e2e

import (
	"context"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/harness"
)

// Mutation tests: an operator broken on purpose, by a decorator around its client (never
// a switch in the operator's code), rolls a DGD, and the suite's checks must catch it.
// Each spec passes when the watcher or the Dynamo observer reports the violation the
// break makes (scenario.expect), and fails if they stay silent.

// brokenClient makes the operator's client as the manager would (reading through its
// cache) and wraps it with funcs.
func brokenClient(funcs func(first *firstRevision) interceptor.Funcs) client.NewClientFunc {
	return func(cfg *rest.Config, opts client.Options) (client.Client, error) {
		c, err := client.NewWithWatch(cfg, opts)
		if err != nil {
			return nil, err
		}
		return interceptor.NewClient(c, funcs(&firstRevision{})), nil
	}
}

// firstRevision remembers the worker hash of the first worker workload the operator
// created (revision 1 of the one DGD of the spec) and the newest.
type firstRevision struct {
	mu            sync.Mutex
	first, newest string
}

func (f *firstRevision) created(hash string) (first bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.first == "" {
		f.first = hash
	}
	f.newest = hash
	return f.first == hash
}

func (f *firstRevision) original() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first
}

func (f *firstRevision) latest() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.newest
}

var _ = Describe("mutation: a broken operator fails the suite", func() {
	It("catches an operator that deletes the old revision's Services before the new revision is routable (the observer's zero-routable gap)", func() {
		// As soon as it creates the first workload of a new revision, it deletes the
		// Services of the older revisions and from then on pretends to re-create them:
		// the old pods still run, but their EndpointSlices go with their Services. The
		// observer's former rule (lag whenever the routed pods still run) passed this.
		withBrokenOperator(brokenClient(func(rev *firstRevision) interceptor.Funcs {
			return interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				hash := obj.GetLabels()[v1alpha1.LabelWorkerHash]
				switch obj.(type) {
				case *corev1.Service:
					if hash != "" && hash != rev.latest() {
						return nil // "created"
					}
				case *appsv1.Deployment:
					if hash == "" || rev.created(hash) {
						break
					}
					if err := c.Create(ctx, obj, opts...); err != nil {
						return err
					}
					var svcs corev1.ServiceList
					if err := c.List(ctx, &svcs, client.InNamespace(obj.GetNamespace()), client.HasLabels{v1alpha1.LabelWorkerHash}); err != nil {
						return err
					}
					for i := range svcs.Items {
						if svcs.Items[i].Labels[v1alpha1.LabelWorkerHash] != hash {
							_ = c.Delete(ctx, &svcs.Items[i])
						}
					}
					return nil
				}
				return c.Create(ctx, obj, opts...)
			}}
		}))
		s := start(gpus(harness.NewDGD(newNamespace(), "early").Disagg(2, 1, "vllm:v1").Obj()))
		s.expect = []string{"zero-routable gap", "that routed to pod", "is gone"}
		s.update(image("vllm:v2"))
		s.waitRolledOut(2)
	})

	It("catches an operator whose backend sets decode to another count than its plan (the ratio skipped; its status still reports the plan)", func() {
		// Every decode Deployment of a new revision is created at 0 instead of the
		// planned count; the status the pass writes reports the plan. The former check
		// (the ratio of the status's workloads) passed this.
		withBrokenOperator(brokenClient(func(rev *firstRevision) interceptor.Funcs {
			return interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if d, ok := obj.(*appsv1.Deployment); ok && d.Labels[v1alpha1.LabelWorkerHash] != "" && !rev.created(d.Labels[v1alpha1.LabelWorkerHash]) &&
					d.Labels[v1alpha1.LabelService] == "decode" {
					d.Spec.Replicas = ptr.To[int32](0)
				}
				return c.Create(ctx, obj, opts...)
			}}
		}))
		s := start(gpus(harness.NewDGD(newNamespace(), "skew").Disagg(2, 1, "vllm:v1").Obj()))
		s.expect = []string{"orphan prefill: pool", "orphan: pool", "status reports skew-decode-"}
		s.update(image("vllm:v2"))
		s.waitRolledOut(2)
	})

	It("catches an operator whose new revision registers in the old revision's Dynamo namespace (isolation)", func() {
		// Every worker Deployment of a new revision is created with the first revision's
		// DYN_NAMESPACE_WORKER_SUFFIX: a new prefill would hand KV cache to an old decode.
		withBrokenOperator(brokenClient(func(rev *firstRevision) interceptor.Funcs {
			return interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if d, ok := obj.(*appsv1.Deployment); ok && d.Labels[v1alpha1.LabelWorkerHash] != "" && !rev.created(d.Labels[v1alpha1.LabelWorkerHash]) {
					for i := range d.Spec.Template.Spec.Containers {
						for j, e := range d.Spec.Template.Spec.Containers[i].Env {
							if e.Name == v1alpha1.EnvDynNamespaceWorkerSuffix {
								d.Spec.Template.Spec.Containers[i].Env[j].Value = rev.original()
							}
						}
					}
				}
				return c.Create(ctx, obj, opts...)
			}}
		}))
		s := start(gpus(harness.NewDGD(newNamespace(), "mixed").Disagg(2, 1, "vllm:v1").Obj()))
		s.expect = []string{"isolation: pod mixed-", "isolation: revisions"}
		s.update(image("vllm:v2"))
		// Rolled out, but the frontend never discovers the new revision's namespace: not
		// waited for.
		s.until("revision 2 rolled out", func(d *v1alpha1.DynamoGraphDeployment, pods []corev1.Pod) bool {
			return d.Status.UpdateRevisionNumber == 2 && RolledOut(d, pods)
		})
	})
})
