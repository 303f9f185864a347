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
	// expect, when set, are the violations a broken operator must make (a mutation
	// test): each a substring of some violation of the watcher or the observer.
	expect []string
	// flushed is when the watcher was last flushed by until.
	flushed time.Time
}

// maxLagGaps bounds the gaps per scenario that the observer proves to be discovery lag
// (the frontend seeing no ready generation while every pod, Service and EndpointSlice
// it last routed through is still there): measured 0 in every scenario of this suite
// on Nov 26 (docs/testing.md, test/observe); 1 allows one (an endpoint condition or a cache behind
// another on a loaded machine) without hiding a pattern.
const maxLagGaps = 1

// start creates the DGD, starts the watcher and the observer first so they see every
// event, and waits until revision 1 is fully rolled out and ready. At the end of the
// spec the watcher is flushed (every event up to then judged) and every violation of
// either fails the spec, also those seen after the spec's last wait.
func start(obj *v1alpha1.DynamoGraphDeployment) *scenario {
	return startObject(obj)
}

// startObject is start for a DGD of either version (a v1beta1 one is written as such).
func startObject(obj client.Object) *scenario {
	s := begin(obj)
	s.waitRolledOut(1)
	return s
}

// begin is startObject without the wait.
func begin(obj client.Object) *scenario {
	w, err := Watch(ctx, cl.Config, obj.GetNamespace(), obj.GetName())
	Expect(err).NotTo(HaveOccurred())
	o, err := observe.Start(ctx, observe.Options{Config: cl.Config, Namespace: obj.GetNamespace(), DGD: obj.GetName()})
	Expect(err).NotTo(HaveOccurred())
	s := &scenario{ns: obj.GetNamespace(), name: obj.GetName(), w: w, o: o, flushed: time.Now()}
	DeferCleanup(func() {
		flushErr := w.Flush(ctx)
		w.Stop()
		o.Stop() // before the DGD goes: its deletion is a gap on purpose
		st := o.Stats()
		GinkgoWriter.Printf("%s/%s watcher: %+v\n", s.ns, s.name, w.Snapshot())
		GinkgoWriter.Printf("%s/%s Dynamo observer: %+v\n", s.ns, s.name, st)
		AddReportEntry("lag gaps", fmt.Sprintf("%s/%s: %d lag gaps (%d states, %s, longest %s)", s.ns, s.name,
			st.LagGaps, st.LagGapStates, st.LagGapTime.Round(time.Millisecond), st.LongestLagGap.Round(time.Millisecond)))
		violations := append(append(w.Violations(), o.Violations()...), proxyErrors(s.ns)...)
		s.remove() // free the fake GPUs for the next scenario, whatever happened
		Expect(flushErr).NotTo(HaveOccurred())
		if s.expect != nil {
			GinkgoWriter.Printf("%s/%s: the broken operator was caught:\n  %s\n", s.ns, s.name, strings.Join(violations, "\n  "))
			for _, e := range s.expect {
				Expect(violations).To(ContainElement(ContainSubstring(e)), "the broken operator must be caught")
			}
			return
		}
		Expect(violations).To(BeEmpty(), "what the watcher and the Dynamo runtime would have seen")
		Expect(st.LagGaps).To(BeNumerically("<=", maxLagGaps), "gaps proven to be discovery lag: %v", st.LagGapCauses)
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

// update writes a change to the DGD and returns the resourceVersion it was written at.
func (s *scenario) update(change func(*v1alpha1.DynamoGraphDeployment)) uint64 {
	var rv string
	Eventually(func() error {
		d := s.dgd()
		change(d)
		err := k8s.Update(ctx, d)
		rv = d.ResourceVersion
		return err
	}).Should(Succeed())
	return parseRV(rv)
}

// until polls cond, failing at once when the watcher or the observer reports a
// violation (the watcher judges the workloads' states once flushed: every second here,
// and when cond holds).
func (s *scenario) until(what string, cond func(*v1alpha1.DynamoGraphDeployment, []corev1.Pod) bool) {
	Eventually(func(g Gomega) {
		if time.Since(s.flushed) > time.Second {
			g.Expect(s.w.Flush(ctx)).To(Succeed())
			s.flushed = time.Now()
		}
		if v := append(append(s.w.Violations(), s.o.Violations()...), proxyErrors(s.ns)...); len(v) > 0 && s.expect == nil {
			StopTrying(fmt.Sprintf("invariant violated: %s", strings.Join(v, "; "))).Now()
		}
		d := s.dgd()
		g.Expect(cond(d, s.pods())).To(BeTrue(), "%s: status %s", what, Summary(d))
	}, RolloutTimeout, 100*time.Millisecond).Should(Succeed())
	Expect(s.w.Flush(ctx)).To(Succeed())
	if s.expect == nil {
		Expect(append(append(s.w.Violations(), s.o.Violations()...), proxyErrors(s.ns)...)).To(BeEmpty())
	}
}

// proxyErrors are the proxy pods of namespace ns that did not start, or whose agent or
// HAProxy exited while their pod ran (test/proxypod).
func proxyErrors(ns string) []string {
	var out []string
	for _, e := range proxyRunner.Errors() {
		if strings.HasPrefix(e, "pod "+ns+"/") {
			out = append(out, "proxy "+e)
		}
	}
	return out
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
