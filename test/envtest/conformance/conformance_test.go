// Package conformance_test runs one table of backend contract checks against every
// adapter (Deployment, LeaderWorkerSet, Grove) on the same inputs, against a real API
// server: what backends.Backend promises (idempotent Ensure, Scale and Delete,
// AlreadyExists and NotFound as success, Observe under Name) and what hands and other
// writers do to workloads (labels and annotations stripped, a workload deleted).
package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/deployment"
	"github.com/dgd-rollout/operator/backends/grove"
	"github.com/dgd-rollout/operator/backends/lws"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/revisions"
	grovecrds "github.com/dgd-rollout/operator/test/grove"
	"github.com/dgd-rollout/operator/test/harness"
	lwscrds "github.com/dgd-rollout/operator/test/lws"
)

var (
	env *harness.Env
	ctx = context.Background()
	nsN int
)

func TestBackendConformance(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Backend conformance (envtest)")
}

var _ = BeforeSuite(func() {
	dir, err := grovecrds.CRDDir()
	Expect(err).NotTo(HaveOccurred())
	env, err = harness.Start(false, append(lwscrds.CRDPaths(), dir)...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
})

// adapter is one backend under test: how to build it over a client, and an empty
// object of the kind that holds a workload (for writes by hand).
type adapter struct {
	name    string
	backend v1alpha1.BackendType
	make    func(client.Client) backends.Backend
	// object is the object a workload's Delete removes: the workload, or its group.
	object func(w backends.Workload) client.Object
}

var adapters = []adapter{
	{"Deployment", v1alpha1.BackendDeployment,
		func(c client.Client) backends.Backend { return deployment.New(c, c, c.Scheme(), render.Config{}) },
		func(w backends.Workload) client.Object {
			return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: w.Name}}
		}},
	{"LeaderWorkerSet", v1alpha1.BackendLeaderWorkerSet,
		func(c client.Client) backends.Backend { return lws.New(c, c.Scheme(), render.Config{}) },
		func(w backends.Workload) client.Object {
			return &lwsv1.LeaderWorkerSet{ObjectMeta: metav1.ObjectMeta{Name: w.Name}}
		}},
	{"Grove", v1alpha1.BackendGrove,
		func(c client.Client) backends.Backend { return grove.New(c, c.Scheme(), render.Config{}) },
		func(w backends.Workload) client.Object {
			return &grovev1.PodCliqueSet{ObjectMeta: metav1.ObjectMeta{Name: w.Group.Name}}
		}},
}

// counting counts the writes that reach the API server, and can make one Get of a
// named object answer NotFound (a cache that has not seen a create yet).
type counting struct {
	client.Client
	mu       sync.Mutex
	writes   int
	notFound string
}

func (c *counting) count() int { c.mu.Lock(); defer c.mu.Unlock(); return c.writes }

func (c *counting) wrote() { c.mu.Lock(); c.writes++; c.mu.Unlock() }

func (c *counting) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.mu.Lock()
	miss := c.notFound != "" && key.Name == c.notFound
	if miss {
		c.notFound = ""
	}
	c.mu.Unlock()
	if miss {
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *counting) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.wrote()
	return c.Client.Create(ctx, obj, opts...)
}

func (c *counting) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.wrote()
	return c.Client.Update(ctx, obj, opts...)
}

func (c *counting) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.wrote()
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *counting) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.wrote()
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *counting) SubResource(sub string) client.SubResourceClient {
	return countingSub{SubResourceClient: c.Client.SubResource(sub), c: c}
}

type countingSub struct {
	client.SubResourceClient
	c *counting
}

func (s countingSub) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.c.wrote()
	return s.SubResourceClient.Update(ctx, obj, opts...)
}

func (s countingSub) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.c.wrote()
	return s.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

// fixture is one adapter over a fresh namespace and DGD (prefill 2, decode 1, a
// frontend), and the worker pool of its revision "h1".
type fixture struct {
	c    *counting
	b    backends.Backend
	dgd  *v1alpha1.DynamoGraphDeployment
	pool backends.Pool
	a    adapter
}

func newFixture(a adapter) *fixture {
	nsN++
	ns := fmt.Sprintf("conf-%d", nsN)
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	dgd := harness.NewDGD(ns, "g").Disagg(2, 1, "vllm:v1").Backend(a.backend).Obj()
	Expect(env.Client.Create(ctx, dgd)).To(Succeed())
	c := &counting{Client: env.Client}
	f := &fixture{c: c, b: a.make(c), dgd: dgd, a: a}
	f.pool = backends.Pool{Hash: "h1"}
	for _, name := range dgd.WorkerServiceNames() {
		svc := dgd.Spec.Services[name]
		f.pool.Services = append(f.pool.Services, backends.ServiceWorkload{Key: backends.Key{Service: name, Hash: "h1"}, Spec: svc, Replicas: svc.DesiredReplicas()})
	}
	return f
}

func (f *fixture) stable() backends.Pool {
	svc := f.dgd.Spec.Services["Frontend"]
	return backends.Pool{Services: []backends.ServiceWorkload{{Key: backends.Key{Service: "Frontend"}, Spec: svc, Replicas: 1}}}
}

func (f *fixture) observe() map[backends.Key]backends.Workload {
	ws, err := f.b.Observe(ctx, f.dgd)
	Expect(err).NotTo(HaveOccurred())
	out := map[backends.Key]backends.Workload{}
	for _, w := range ws {
		if w.Terminating || w.Outdated {
			continue
		}
		Expect(out).NotTo(HaveKey(w.Key), "one current workload per key")
		out[w.Key] = w
	}
	return out
}

// object reads the object holding w.
func (f *fixture) object(w backends.Workload) client.Object {
	o := f.a.object(w)
	o.SetNamespace(f.dgd.Namespace)
	Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
	return o
}

func (f *fixture) strip(w backends.Workload) {
	o := f.object(w)
	o.SetLabels(nil)
	o.SetAnnotations(nil)
	Expect(env.Client.Update(ctx, o)).To(Succeed())
}

var _ = Describe("every backend keeps the Backend contract", func() {
	for _, a := range adapters {
		Context(a.name, func() {
			It("creates a pool once, writes nothing on a second Ensure, and observes every workload under Name", func() {
				f := newFixture(a)
				Expect(f.b.Ensure(ctx, f.dgd, f.pool)).To(Succeed())
				n := f.c.count()
				Expect(f.b.Ensure(ctx, f.dgd, f.pool)).To(Succeed())
				Expect(f.c.count()).To(Equal(n), "a second Ensure writes nothing")
				ws := f.observe()
				Expect(ws).To(HaveLen(2))
				for _, sw := range f.pool.Services {
					w := ws[sw.Key]
					Expect(w.Name).To(Equal(f.b.Name(f.dgd, sw.Key)))
					Expect(w.Replicas).To(Equal(sw.Replicas), sw.Service)
					Expect(w.Kind).NotTo(BeEmpty())
				}
			})

			It("scales, writes nothing when the count is already set, and takes a missing workload as success", func() {
				f := newFixture(a)
				Expect(f.b.Ensure(ctx, f.dgd, f.pool)).To(Succeed())
				key := backends.Key{Service: "decode", Hash: "h1"}
				Expect(f.b.Scale(ctx, f.dgd, backends.Workload{Key: key}, 3)).To(Succeed())
				Expect(f.observe()[key].Replicas).To(Equal(int32(3)))
				n := f.c.count()
				Expect(f.b.Scale(ctx, f.dgd, backends.Workload{Key: key}, 3)).To(Succeed())
				Expect(f.c.count()).To(Equal(n))
				Expect(f.b.Scale(ctx, f.dgd, backends.Workload{Key: backends.Key{Service: "decode", Hash: "gone"}}, 2)).To(Succeed())
			})

			It("deletes idempotently, also a workload deleted by hand, and Ensure makes it again", func() {
				f := newFixture(a)
				Expect(f.b.Ensure(ctx, f.dgd, f.pool)).To(Succeed())
				w := f.observe()[backends.Key{Service: "prefill", Hash: "h1"}]
				Expect(env.Client.Delete(ctx, f.object(w))).To(Succeed())
				Expect(f.b.Delete(ctx, f.dgd, w)).To(Succeed(), "gone by hand: NotFound is success")
				Expect(f.b.Delete(ctx, f.dgd, w)).To(Succeed())
				Expect(f.observe()).NotTo(HaveKey(w.Key))
				Expect(f.b.Ensure(ctx, f.dgd, f.pool)).To(Succeed())
				Expect(f.observe()).To(HaveKey(w.Key))
			})

			It("takes AlreadyExists as success when its read missed an object that exists", func() {
				f := newFixture(a)
				Expect(f.b.Ensure(ctx, f.dgd, f.pool)).To(Succeed())
				w := f.observe()[backends.Key{Service: "decode", Hash: "h1"}]
				f.c.notFound = f.object(w).GetName()
				Expect(f.b.Ensure(ctx, f.dgd, f.pool)).To(Succeed())
			})

			It("finds workloads stripped of labels and annotations by their owner and restores the labels", func() {
				f := newFixture(a)
				Expect(f.b.Ensure(ctx, f.dgd, f.pool)).To(Succeed())
				before := f.observe()
				for _, w := range before {
					f.strip(w)
				}
				n := f.c.count()
				after := f.observe()
				Expect(f.c.count()).To(Equal(n), "Observe only reads")
				Expect(after).To(HaveLen(len(before)))
				for k, w := range before {
					Expect(after[k].Name).To(Equal(w.Name))
					Expect(after[k].Relabel).To(HaveKeyWithValue(v1alpha1.LabelGraph, "g"), "the labels to put back are reported")
					Expect(f.b.Relabel(ctx, f.dgd, after[k])).To(Succeed())
					Expect(f.object(w).GetLabels()).To(HaveKeyWithValue(v1alpha1.LabelGraph, "g"))
				}
				for k := range before {
					Expect(f.observe()[k].Relabel).To(BeEmpty(), "nothing left to put back")
				}
			})

			It("updates a stable service stripped of labels and annotations to a new template", func() {
				f := newFixture(a)
				Expect(f.b.Ensure(ctx, f.dgd, f.stable())).To(Succeed())
				key := backends.Key{Service: "Frontend"}
				f.strip(f.observe()[key])
				f.dgd.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = "frontend:v2"
				Expect(f.b.Ensure(ctx, f.dgd, f.stable())).To(Succeed())
				cur := f.observe()[key]
				Expect(cur.Name).To(Equal(f.b.Name(f.dgd, key)))
				ws, err := f.b.Observe(ctx, f.dgd)
				Expect(err).NotTo(HaveOccurred())
				outdated := 0
				for _, w := range ws {
					if w.Outdated {
						outdated++
					}
				}
				if f.b.Describe().StableSideBySide {
					Expect(outdated).To(Equal(1), "the old template's workload stays until the controller deletes it")
				} else {
					Expect(outdated).To(BeZero(), "updated in place")
				}
			})
		})
	}
})

// recreate deletes o and makes an object of the same name and content again: a new
// UID under the old name, as a person, the next leader or another DGD would.
func recreate(o client.Object) client.Object {
	GinkgoHelper()
	old := o.GetUID()
	Expect(env.Client.Delete(ctx, o)).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object)))
	}).Should(BeTrue())
	fresh := o.DeepCopyObject().(client.Object)
	fresh.SetUID("")
	fresh.SetResourceVersion("")
	fresh.SetCreationTimestamp(metav1.Time{})
	fresh.SetManagedFields(nil)
	Expect(env.Client.Create(ctx, fresh)).To(Succeed())
	Expect(fresh.GetUID()).NotTo(Equal(old))
	return fresh
}

// Issue 23: deletes carry a UID precondition, so a stale leader (or any pass acting on
// what it observed before) never deletes an object made under the same name since.
var _ = Describe("deletes remove only the object observed (UID preconditions)", func() {
	for _, a := range adapters {
		It(a.name+": Delete of a workload recreated under its name is refused, the new one kept; the new one's Delete succeeds", func() {
			f := newFixture(a)
			Expect(f.b.Ensure(ctx, f.dgd, f.pool)).To(Succeed())
			stale := f.observe()[backends.Key{Service: "decode", Hash: "h1"}]
			fresh := recreate(f.object(stale))

			err := f.b.Delete(ctx, f.dgd, stale)
			var replaced *backends.ReplacedError
			Expect(errors.As(err, &replaced)).To(BeTrue(), "Delete of the stale workload: %v", err)
			Expect(apierrors.IsConflict(err)).To(BeTrue())
			now := f.object(stale)
			Expect(now.GetUID()).To(Equal(fresh.GetUID()), "the recreated object was deleted")

			current := f.observe()[backends.Key{Service: "decode", Hash: "h1"}]
			Expect(f.b.Delete(ctx, f.dgd, current)).To(Succeed())
			Eventually(func() bool {
				return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(now), now))
			}).Should(BeTrue())
		})
	}

	It("Services, Ingresses, RBAC and ConfigMaps (backends.DeleteObject) and ControllerRevisions (revisions) too", func() {
		f := newFixture(adapters[0])
		ns := f.dgd.Namespace
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g-frontend"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8000}}}}
		Expect(env.Client.Create(ctx, svc)).To(Succeed())
		fresh := recreate(svc.DeepCopy())
		err := backends.DeleteObject(ctx, env.Client, svc, "Service")
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "%v", err)
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(fresh), fresh)).To(Succeed())
		Expect(backends.DeleteObject(ctx, env.Client, fresh, "Service")).To(Succeed())

		rev := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g-0123abcd"}, Revision: 1, Data: runtime.RawExtension{Raw: []byte(`{}`)}}
		Expect(env.Client.Create(ctx, rev)).To(Succeed())
		freshRev := recreate(rev.DeepCopy())
		h := revisions.NewHistory(env.Client, env.Client.Scheme())
		Expect(apierrors.IsConflict(h.Delete(ctx, rev))).To(BeTrue(), "the recreated ControllerRevision was deleted")
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(freshRev), freshRev)).To(Succeed())
		Expect(h.Delete(ctx, freshRev.(*appsv1.ControllerRevision))).To(Succeed())
	})
})
