package deployment_test

import (
	"context"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/dgd-rollout/operator/test/e2e"
	"github.com/dgd-rollout/operator/test/harness"
)

var _ = Describe("mutation: surge", func() {
	It("catches an operator whose client drops a scale-down and makes the scale-ups after it (surge exceeded at a write)", func() {
		// A decorator around the operator's client answers the first decrease of a
		// Deployment's replicas with success without sending it; the pass goes on with its
		// increases. The watcher judges the live Deployments at every write.
		var dropped atomic.Bool
		Expect(env.RestartOperator(harness.Broken{NewClient: func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, opts)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				var o client.SubResourceUpdateOptions
				o.ApplyOptions(opts)
				d, isDeployment := obj.(*appsv1.Deployment)
				if scale, ok := o.SubResourceBody.(*autoscalingv1.Scale); ok && isDeployment && sub == "scale" &&
					scale.Spec.Replicas < ptr.Deref(d.Spec.Replicas, 1) && dropped.CompareAndSwap(false, true) {
					return nil
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			}}), nil
		}})).To(Succeed())
		DeferCleanup(func() { Expect(env.RestartOperator(harness.Broken{})).To(Succeed()) })
		ns := newNamespace()
		obj := harness.NewDGD(ns, "surge").Disagg(4, 2, "vllm:v1").Rollout("1", "0").Obj()
		w, err := e2e.WatchWith(ctx, env.Config, ns, obj.Name, e2e.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(w.Stop)
		_, err = env.Deploy(ctx, obj, harness.Snapshot.Completed)
		Expect(err).NotTo(HaveOccurred())
		update(ns, obj.Name, harness.Image("vllm:v2"))
		// The operator repairs the dropped write once its expectation expires (5 s): the
		// rollout completes, and the watcher saw the state in between.
		_, err = env.Drive(ctx, ns, obj.Name, -1, 40, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
		Expect(dropped.Load()).To(BeTrue(), "a scale-down was dropped")
		Expect(w.Flush(ctx)).To(Succeed())
		Expect(w.Violations()).To(ContainElement(HavePrefix("surge: prefill has 6 replicas set, more than 4+1")))
	})
})
