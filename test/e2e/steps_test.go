package e2e

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/test/observe"
)

// RolloutTimeout bounds one rollout in this suite.
const RolloutTimeout = 3 * time.Minute

// scenario is one DGD under the invariant watcher and the Dynamo observer.
type scenario struct {
	ns, name string
	w        *Watcher
	o        *observe.Observer
}

// start creates the DGD, starts the watcher and the observer first so they see every
// event, and waits until revision 1 is fully rolled out and ready.
func start(obj *v1alpha1.DynamoGraphDeployment) *scenario {
	s := begin(obj)
	s.waitRolledOut(1)
	return s
}

// begin is start without the wait.
func begin(obj *v1alpha1.DynamoGraphDeployment) *scenario {
	w, err := Watch(ctx, cl.Config, obj.Namespace, obj.Name)
	Expect(err).NotTo(HaveOccurred())
	o, err := observe.Start(ctx, observe.Options{Config: cl.Config, Namespace: obj.Namespace, DGD: obj.Name})
	Expect(err).NotTo(HaveOccurred())
	s := &scenario{ns: obj.Namespace, name: obj.Name, w: w, o: o}
	DeferCleanup(func() {
		w.Stop()
		o.Stop() // before the DGD goes: its deletion is a gap on purpose
		GinkgoWriter.Printf("%s/%s watcher: %+v\n", s.ns, s.name, w.Snapshot())
		GinkgoWriter.Printf("%s/%s Dynamo observer: %+v\n", s.ns, s.name, o.Stats())
		violations := o.Violations()
		s.remove() // free the fake GPUs for the next scenario, whatever happened
		Expect(violations).To(BeEmpty(), "what the Dynamo runtime would have seen")
	})
	Expect(k8s.Create(ctx, obj)).To(Succeed())
	return s
}

// remove deletes the DGD and waits until the garbage collector has removed its pods.
func (s *scenario) remove() {
	d := &v1alpha1.DynamoGraphDeployment{}
	d.Namespace, d.Name = s.ns, s.name
	Expect(client.IgnoreNotFound(k8s.Delete(ctx, d))).To(Succeed())
	Eventually(s.pods, time.Minute, 100*time.Millisecond).Should(BeEmpty())
}

func (s *scenario) dgd() *v1alpha1.DynamoGraphDeployment {
	var d v1alpha1.DynamoGraphDeployment
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: s.name}, &d)).To(Succeed())
	return &d
}

func (s *scenario) update(change func(*v1alpha1.DynamoGraphDeployment)) {
	Eventually(func() error {
		d := s.dgd()
		change(d)
		return k8s.Update(ctx, d)
	}).Should(Succeed())
}

// until polls cond, failing at once when the watcher or the observer reports a
// violation.
func (s *scenario) until(what string, cond func(*v1alpha1.DynamoGraphDeployment, []corev1.Pod) bool) {
	Eventually(func(g Gomega) {
		if v := append(s.w.Violations(), s.o.Violations()...); len(v) > 0 {
			StopTrying(fmt.Sprintf("invariant violated: %s", strings.Join(v, "; "))).Now()
		}
		d := s.dgd()
		g.Expect(cond(d, s.pods())).To(BeTrue(), "%s: status %s", what, Summary(d))
	}, RolloutTimeout, 100*time.Millisecond).Should(Succeed())
	Expect(s.w.Violations()).To(BeEmpty())
}

// waitRolledOut waits until revision n is complete: phase Completed, every worker
// pod on the update revision, existing, ready and not terminating.
// Then the frontend discovers the update revision's generation, and only it, once
// the old pods' endpoints are gone.
func (s *scenario) waitRolledOut(n int64) {
	s.until(fmt.Sprintf("revision %d rolled out", n), func(d *v1alpha1.DynamoGraphDeployment, pods []corev1.Pod) bool {
		return d.Status.UpdateRevisionNumber == n && RolledOut(d, pods)
	})
	s.waitDiscoversOnly(UpdateHash(s.dgd()), "the frontend discovers only the new generation")
}

// waitDiscoversOnly waits until the frontend discovers one ready generation, the
// workers of hash.
func (s *scenario) waitDiscoversOnly(hash, why string) {
	want := render.EffectiveNamespace(s.dgd(), true, hash)
	Eventually(func(g Gomega) {
		fv, err := s.o.Frontend(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		var ready []string
		for _, gen := range fv.ReadyGenerations() {
			ready = append(ready, gen.Namespace)
		}
		g.Expect(ready).To(Equal([]string{want}), why)
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
}

func (s *scenario) pods() []corev1.Pod {
	var list corev1.PodList
	Expect(k8s.List(ctx, &list, client.InNamespace(s.ns), client.MatchingLabels{v1alpha1.LabelGraph: s.name})).To(Succeed())
	return list.Items
}
