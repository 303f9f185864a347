package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/traffic/proxy"
)

// Mutation tests of the cohort checks (test/observe cohorts.go): an operator broken by a
// decorator around its client makes a Dynamo upgrade with cohorts, and the observer must
// report what the break does.

// caught waits until a violation of the observer holds each of subs.
func (s *scenario) caught(what string, subs ...string) {
	GinkgoHelper()
	s.expect = subs
	s.until(what, func(*v1alpha1.DynamoGraphDeployment, []corev1.Pod) bool {
		for _, sub := range subs {
			found := false
			for _, v := range s.o.Violations() {
				found = found || strings.Contains(v, sub)
			}
			if !found {
				return false
			}
		}
		return true
	})
}

// onWrite intercepts the operator's creates and updates with change (which may edit the
// object in place) before they are sent.
func onWrite(change func(obj client.Object)) client.NewClientFunc {
	return brokenClient(func(*firstRevision) interceptor.Funcs {
		return interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				change(obj)
				return c.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				change(obj)
				return c.Update(ctx, obj, opts...)
			},
		}
	})
}

var _ = Describe("mutation: a broken operator fails the cohort checks", func() {
	It("catches cohort frontends that discover every revision by prefix", func() {
		// Every cohort frontend's pods get the DGD's prefix filter besides their own
		// namespace, as a shared frontend has: they would route to both revisions.
		withBrokenOperator(onWrite(func(obj client.Object) {
			d, ok := obj.(*appsv1.Deployment)
			if !ok || d.Labels[v1alpha1.LabelComponentType] != v1alpha1.ComponentTypeFrontend || d.Labels[v1alpha1.LabelWorkerHash] == "" {
				return
			}
			c := &d.Spec.Template.Spec.Containers[0]
			for _, e := range c.Env {
				if e.Name == v1alpha1.EnvDynNamespacePrefix {
					return
				}
			}
			c.Env = append(c.Env, corev1.EnvVar{Name: v1alpha1.EnvDynNamespacePrefix, Value: d.Namespace + "-" + d.Labels[v1alpha1.LabelGraph]})
		}))
		s := start(gpus(upgradable(newNamespace(), "prefixed", 2, 1).Obj()))
		s.update(dynamoUpgrade("1.7.0"))
		s.caught("the prefix filter caught", "cohort discovery: frontend pod prefixed-frontend-", "discovers Prefix")
	})

	It("catches a split that weights the new cohort before it can serve", func() {
		// Every desired split naming two cohorts or more is written with all the weight
		// on the cohorts that are not the first one the operator split to: the new
		// cohort takes every request from the moment its frontend exists.
		var mu sync.Mutex
		first := ""
		withBrokenOperator(onWrite(func(obj client.Object) {
			cm, ok := obj.(*corev1.ConfigMap)
			if !ok || !strings.HasSuffix(cm.Name, "-proxy") {
				return
			}
			split, _, err := proxy.ParseSplit(cm.Data)
			if err != nil || len(split.Cohorts) == 0 {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if first == "" {
				first = split.Cohorts[0].Hash
			}
			if len(split.Cohorts) < 2 {
				return
			}
			others := int32(len(split.Cohorts) - 1)
			for i := range split.Cohorts {
				split.Cohorts[i].Weight = 100 / others
				if split.Cohorts[i].Hash == first {
					split.Cohorts[i].Weight = 0
				}
			}
			b, err := json.Marshal(split)
			if err != nil {
				return
			}
			cm.Data[proxy.SplitKey], cm.Data[proxy.VersionKey] = string(b), split.Version()
		}))
		s := start(gpus(upgradable(newNamespace(), "eager", 2, 1).Obj()))
		s.update(dynamoUpgrade("1.7.0"))
		s.caught("the eager split caught", "cohort traffic: cohort ", "receives traffic through eager-frontend (weight 100 in")
	})

	It("catches an entry Service that selects nothing once cohorts start", func() {
		// The entry Service's switch to the proxy selects no pod: clients of the stable
		// address reach nothing.
		withBrokenOperator(onWrite(func(obj client.Object) {
			if svc, ok := obj.(*corev1.Service); ok && svc.Spec.Selector[v1alpha1.LabelTrafficProxy] != "" {
				svc.Spec.Selector[v1alpha1.LabelTrafficProxy] = "nowhere"
			}
		}))
		s := start(gpus(upgradable(newNamespace(), "blind", 2, 1).Obj()))
		s.update(dynamoUpgrade("1.7.0"))
		s.caught("the blind entry caught", "entry: the entry Service blind-frontend has no ready endpoint")
	})
})
