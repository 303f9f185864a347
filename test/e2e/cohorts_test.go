package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/traffic"
	"github.com/dgd-rollout/operator/traffic/proxy"
)

// Cohorts end to end (issue 36 section 3): a Dynamo upgrade, the frontend's, the
// prefill's and the decode's images bumped in one edit, with spec.rollout.frontends
// Auto (the default): every revision gets a cohort, and client traffic moves between
// cohorts through the proxy, whose pods run for real (test/proxypod: the agent from this
// tree's binary under the ServiceAccount and Role the operator rendered, Debian's
// HAProxy). The watcher and the observer judge every state, the observer's cohort checks
// among them (test/observe cohorts.go: no frontend discovers another revision's workers,
// every cohort the proxy's split and its agents' reports send to can serve, the entry
// Service keeps a ready endpoint). What the proxy applies is read from its agents'
// reports, never from the DGD's status.

// runtimeImage is Dynamo's vLLM runtime image at a version.
func runtimeImage(version string) string { return "nvcr.io/nvidia/ai-dynamo/vllm-runtime:" + version }

// dynamoUpgrade sets every service's image, the frontend's and the workers', to Dynamo
// version v: one edit, as a Dynamo upgrade is.
func dynamoUpgrade(v string) func(*v1alpha1.DynamoGraphDeployment) {
	return func(d *v1alpha1.DynamoGraphDeployment) {
		for _, name := range d.ServiceNames() {
			d.Spec.Services[name].ExtraPodSpec.MainContainer.Image = runtimeImage(v)
		}
	}
}

// upgradable is a DGD of a frontend, prefill P and decode D, all on Dynamo 1.6.0.
func upgradable(ns, name string, p, d int32) *harness.DGD {
	b := harness.NewDGD(ns, name).Disagg(p, d, runtimeImage("1.6.0"))
	b.Obj().Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = runtimeImage("1.6.0")
	return b
}

var _ = Describe("Cohorts: a Dynamo upgrade through the proxy (its pods run for real)", func() {
	It("upgrades Dynamo on Deployments: a cohort per revision, weights following capacity, then only the new cohort", func() {
		s := start(gpus(upgradable(newNamespace(), "upgrade", 4, 2).Obj()))
		log := s.recordReports()
		s.update(dynamoUpgrade("1.7.0"))
		s.waitRolledOut(2)
		s.checkCohortsDone()
		// Weights follow capacity: the proxy applied splits giving both cohorts traffic.
		Expect(log.any(func(r map[string]proxy.Report) bool { return splitsBetween(r, 2) })).To(BeTrue(),
			"no report of the proxy's agents had two cohorts above 0: %s", log)
	})

	It("upgrades Dynamo on LeaderWorkerSets (multinode gangs, the real LWS controllers)", func() {
		obj := upgradable(newNamespace(), "gangs", 2, 1).Multinode("prefill", 2).Multinode("decode", 4).Obj()
		s := start(gpus(obj))
		s.recordReports()
		s.update(dynamoUpgrade("1.7.0"))
		s.waitRolledOut(2)
		checkGangs(s)
		s.checkCohortsDone()
	})

	It("runs a setWeight canary (25%, a header route, 50%, a pause), aborts it (100% on the stable cohort first, then drained), retries and completes it", func() {
		obj := gpus(upgradable(newNamespace(), "canary", 4, 2).Obj())
		pin := v1alpha1.HeaderRoute{Name: "x-dgd-canary", Value: "yes"}
		obj.Spec.Rollout = &v1alpha1.RolloutSpec{Steps: []v1alpha1.RolloutStep{
			{SetWeight: ptr.To(int32(25))}, {SetHeaderRoute: &pin}, {SetWeight: ptr.To(int32(50))}, {Pause: &v1alpha1.RolloutPause{}},
		}}
		s := start(obj)
		stable := UpdateHash(s.dgd())
		log := s.recordReports()
		s.update(dynamoUpgrade("1.7.0"))
		s.until("revision 2 begun", func(d *v1alpha1.DynamoGraphDeployment, _ []corev1.Pod) bool {
			return d.Status.UpdateRevisionNumber == 2
		})
		canary := UpdateHash(s.dgd())
		atPause := func(d *v1alpha1.DynamoGraphDeployment, _ []corev1.Pod) bool {
			ru := d.Status.RollingUpdate
			return d.Status.UpdateRevisionNumber == 2 && ru != nil && ru.CurrentStepIndex != nil && *ru.CurrentStepIndex == 3
		}
		s.until("step 4 (the pause)", atPause)
		s.untilReports("50% on the canary with the header route to it, at the pause", func(r map[string]proxy.Report) bool {
			return weighs(r, map[string]int32{stable: 50, canary: 50}) && pins(r, canary)
		})
		// Each step came into effect in the proxy, in order.
		Expect(log.inOrder(
			func(r map[string]proxy.Report) bool {
				return weighs(r, map[string]int32{stable: 75, canary: 25}) && pins(r, "")
			},
			func(r map[string]proxy.Report) bool {
				return weighs(r, map[string]int32{stable: 75, canary: 25}) && pins(r, canary)
			},
			func(r map[string]proxy.Report) bool {
				return weighs(r, map[string]int32{stable: 50, canary: 50}) && pins(r, canary)
			},
		)).To(Succeed(), "the proxy's reports: %s", log)

		// Abort: every worker back on the stable revision, the traffic first.
		Expect(s.w.Flush(ctx)).To(Succeed())
		held := s.targets(canary)
		aborted := s.update(func(d *v1alpha1.DynamoGraphDeployment) {
			metav1.SetMetaDataAnnotation(&d.ObjectMeta, v1alpha1.AnnotationAbort, v1alpha1.AttemptTag(2, 1))
		})
		s.until("aborted, the canary drained", func(d *v1alpha1.DynamoGraphDeployment, pods []corev1.Pod) bool {
			ru := d.Status.RollingUpdate
			return ru != nil && ru.Phase == v1alpha1.RolloutAborted && ru.EndTime != nil && onlyRevision(pods, stable)
		})
		Expect(s.w.Flush(ctx)).To(Succeed())
		back := log.firstAfter(aborted, func(r map[string]proxy.Report) bool {
			return weighs(r, map[string]int32{stable: 100, canary: 0}) || weighs(r, map[string]int32{stable: 100})
		})
		Expect(back).NotTo(BeZero(), "the proxy never reported 100%% on the stable cohort after the abort: %s", log)
		drained := 0
		for _, t := range s.w.Targets(canary) {
			if t.RV > aborted && t.Replicas < held[t.Name] {
				drained++
				Expect(t.RV).To(BeNumerically(">", back), "%s %s of the canary scaled to %d (resourceVersion %d) before the proxy had 100%% on the stable cohort (%d)",
					t.Kind, t.Name, t.Replicas, t.RV, back)
			}
		}
		Expect(drained).To(BeNumerically(">", 0), "no scale-down of the canary's workloads recorded after the abort: %v", s.w.Targets(canary))
		s.untilReports("100% on the stable cohort, the canary removed", func(r map[string]proxy.Report) bool {
			return weighs(r, map[string]int32{stable: 100})
		})

		// Retry: the steps again, then completion once promoted.
		s.update(func(d *v1alpha1.DynamoGraphDeployment) {
			metav1.SetMetaDataAnnotation(&d.ObjectMeta, v1alpha1.AnnotationRetry, v1alpha1.AttemptTag(2, 1))
		})
		s.until("attempt 2 at the pause", func(d *v1alpha1.DynamoGraphDeployment, pods []corev1.Pod) bool {
			return atPause(d, pods) && d.Status.RollingUpdate.Attempt == 2
		})
		s.untilReports("50% on the canary again, with the header route", func(r map[string]proxy.Report) bool {
			return weighs(r, map[string]int32{stable: 50, canary: 50}) && pins(r, canary)
		})
		s.update(func(d *v1alpha1.DynamoGraphDeployment) {
			metav1.SetMetaDataAnnotation(&d.ObjectMeta, v1alpha1.AnnotationPromote, "2/full")
		})
		s.waitRolledOut(2)
		s.checkCohortsDone()
		Expect(s.o.Stats().SplitStates).To(BeNumerically(">", 0), "the observer never saw two cohorts receive traffic at once")
		GinkgoWriter.Printf("%s/%s: the abort at resourceVersion %d, 100%% on the stable cohort at %d, %d scale-downs of the canary after it; the proxy's reports:%s\n",
			s.ns, s.name, aborted, back, drained, log)
	})
})

// checkCohortsDone checks the end of a rollout with cohorts through the proxy: only
// the update revision's frontend and workers run, the entry Service selects the proxy,
// every proxy pod (run by test/proxypod) reports the update revision's cohort at 100,
// and the observer judged states with cohorts and traffic.
func (s *scenario) checkCohortsDone() {
	GinkgoHelper()
	d := s.dgd()
	hash := UpdateHash(d)
	proxies := 0
	for _, p := range s.pods() {
		if p.Labels[v1alpha1.LabelTrafficProxy] == "true" {
			proxies++
			continue
		}
		Expect(p.Labels[v1alpha1.LabelWorkerHash]).To(Equal(hash), "pod %s of service %s is not of the update revision's cohort", p.Name, p.Labels[v1alpha1.LabelService])
	}
	Expect(proxies).To(Equal(int(proxy.DefaultReplicas)), "proxy pods")
	var entry corev1.Service
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: decide.EntryName(d, "Frontend")}, &entry)).To(Succeed())
	Expect(entry.Spec.Selector).To(HaveKeyWithValue(v1alpha1.LabelTrafficProxy, "true"), "the entry Service selects the proxy")
	s.untilReports("the update revision's cohort at 100", func(r map[string]proxy.Report) bool {
		return weighs(r, map[string]int32{hash: 100})
	})
	Expect(proxyRunner.Running()).To(ContainElement(HavePrefix(s.ns+"/")), "test/proxypod runs the proxy's pods")
	st := s.o.Stats()
	GinkgoWriter.Printf("%s/%s cohorts: %d states with cohorts, %d with traffic to a cohort, %d to two or more\n", s.ns, s.name, st.CohortStates, st.TrafficStates, st.SplitStates)
	Expect(st.CohortStates).To(BeNumerically(">", 0), "the observer judged no state with cohorts")
	Expect(st.TrafficStates).To(BeNumerically(">", 0), "the observer saw no traffic sent to a cohort")
}

// targets are the replicas of hash's workloads as the watcher last recorded them, by
// name.
func (s *scenario) targets(hash string) map[string]int32 {
	out := map[string]int32{}
	for _, t := range s.w.Targets(hash) {
		out[t.Name] = t.Replicas
	}
	return out
}

// onlyRevision: every pod of a service (the proxy's aside) is of revision hash.
func onlyRevision(pods []corev1.Pod, hash string) bool {
	for _, p := range pods {
		if p.Labels[v1alpha1.LabelTrafficProxy] != "true" && p.Labels[v1alpha1.LabelWorkerHash] != hash {
			return false
		}
	}
	return true
}

// proxyReports are the reports of the DGD's live proxy pods, by pod, read from the
// status ConfigMap the agents write; ok when every live proxy pod (at least one) has
// one.
func (s *scenario) proxyReports() (map[string]proxy.Report, bool) {
	d := s.dgd()
	t := decide.TrafficBase(d, "Frontend", traffic.Config{})
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: proxy.StatusName(t)}, &cm); err != nil {
		return nil, false
	}
	return reportsOf(cm.Data, s.liveProxyPods())
}

// liveProxyPods are the names of the DGD's proxy pods not being deleted.
func (s *scenario) liveProxyPods() []string {
	var out []string
	for _, p := range s.pods() {
		if p.Labels[v1alpha1.LabelTrafficProxy] == "true" && p.DeletionTimestamp.IsZero() {
			out = append(out, p.Name)
		}
	}
	return out
}

// reportsOf decodes the reports of pods from a status ConfigMap's data; ok when each of
// them (at least one) has a report that decodes.
func reportsOf(data map[string]string, pods []string) (map[string]proxy.Report, bool) {
	out := map[string]proxy.Report{}
	for _, pod := range pods {
		r, err := proxy.ParseReport(data[pod])
		if err != nil {
			return out, false
		}
		out[pod] = r
	}
	return out, len(pods) > 0
}

// untilReports waits until every live proxy pod reports and cond holds of the reports.
func (s *scenario) untilReports(what string, cond func(map[string]proxy.Report) bool) {
	GinkgoHelper()
	s.until(what, func(*v1alpha1.DynamoGraphDeployment, []corev1.Pod) bool {
		r, ok := s.proxyReports()
		return ok && cond(r)
	})
}

// weighs: every report routes exactly the cohorts of want at their weights (a cohort
// being removed aside).
func weighs(reports map[string]proxy.Report, want map[string]int32) bool {
	for _, r := range reports {
		got := map[string]int32{}
		for h, c := range r.Cohorts {
			if !c.Removing {
				got[h] = c.Weight
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return false
		}
	}
	return len(reports) > 0
}

// pins: every report's header route is to hash ("" for none).
func pins(reports map[string]proxy.Report, hash string) bool {
	for _, r := range reports {
		if r.HeaderRoute != hash {
			return false
		}
	}
	return len(reports) > 0
}

// splitsBetween: every report routes to n cohorts above 0.
func splitsBetween(reports map[string]proxy.Report, n int) bool {
	for _, r := range reports {
		above := 0
		for _, c := range r.Cohorts {
			if c.Weight > 0 {
				above++
			}
		}
		if above != n {
			return false
		}
	}
	return len(reports) > 0
}

// reportLog is every version of a DGD's proxy status ConfigMap, by resourceVersion,
// with the reports of the proxy pods live when it is read.
type reportLog struct {
	s        *scenario
	mu       sync.Mutex
	versions []reportVersion
}

type reportVersion struct {
	rv   uint64
	data map[string]string
}

// recordReports records every version of the DGD's proxy status ConfigMap from now to
// the end of the spec (a watch of it alone, as the agents' Role allows them).
func (s *scenario) recordReports() *reportLog {
	GinkgoHelper()
	l := &reportLog{s: s}
	cs, err := kubernetes.NewForConfig(cl.Config)
	Expect(err).NotTo(HaveOccurred())
	name := proxy.StatusName(decide.TrafficBase(s.dgd(), "Frontend", traffic.Config{}))
	lw := toolscache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", s.ns, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	})
	keep := func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			l.mu.Lock()
			l.versions = append(l.versions, reportVersion{rv: parseRV(cm.ResourceVersion), data: cm.Data})
			l.mu.Unlock()
		}
	}
	_, inf := toolscache.NewInformerWithOptions(toolscache.InformerOptions{ListerWatcher: lw, ObjectType: &corev1.ConfigMap{},
		Handler: toolscache.ResourceEventHandlerFuncs{AddFunc: keep, UpdateFunc: func(_, o any) { keep(o) }}})
	stop := make(chan struct{})
	go inf.Run(stop)
	DeferCleanup(func() { close(stop) })
	return l
}

// reports are the decoded reports of each version, oldest first.
func (l *reportLog) reports() ([]uint64, []map[string]proxy.Report) {
	pods := l.s.liveProxyPods()
	l.mu.Lock()
	defer l.mu.Unlock()
	var rvs []uint64
	var out []map[string]proxy.Report
	for _, v := range l.versions {
		if r, ok := reportsOf(v.data, pods); ok {
			rvs = append(rvs, v.rv)
			out = append(out, r)
		}
	}
	return rvs, out
}

// any reports whether some version's reports satisfy cond.
func (l *reportLog) any(cond func(map[string]proxy.Report) bool) bool {
	_, all := l.reports()
	for _, r := range all {
		if cond(r) {
			return true
		}
	}
	return false
}

// firstAfter is the resourceVersion of the first version after rv whose reports satisfy
// cond, 0 when none does.
func (l *reportLog) firstAfter(rv uint64, cond func(map[string]proxy.Report) bool) uint64 {
	rvs, all := l.reports()
	for i, r := range all {
		if rvs[i] > rv && cond(r) {
			return rvs[i]
		}
	}
	return 0
}

// inOrder checks that versions satisfying each of conds came one after the other.
func (l *reportLog) inOrder(conds ...func(map[string]proxy.Report) bool) error {
	_, all := l.reports()
	i := 0
	for _, r := range all {
		if i < len(conds) && conds[i](r) {
			i++
		}
	}
	if i < len(conds) {
		return fmt.Errorf("condition %d of %d never held after the ones before it", i+1, len(conds))
	}
	return nil
}

// String prints each version's weights and header route, one per line.
func (l *reportLog) String() string {
	rvs, all := l.reports()
	var b strings.Builder
	for i, r := range all {
		pods := make([]string, 0, len(r))
		for p := range r {
			pods = append(pods, p)
		}
		sort.Strings(pods)
		fmt.Fprintf(&b, "\n  rv %d:", rvs[i])
		for _, p := range pods {
			fmt.Fprintf(&b, " %s{", p)
			hashes := make([]string, 0, len(r[p].Cohorts))
			for h := range r[p].Cohorts {
				hashes = append(hashes, h)
			}
			sort.Strings(hashes)
			for _, h := range hashes {
				c := r[p].Cohorts[h]
				fmt.Fprintf(&b, " %s=%d/%d", h, c.Weight, c.InFlight)
				if c.Removing {
					b.WriteString("(removing)")
				}
			}
			if r[p].HeaderRoute != "" {
				fmt.Fprintf(&b, " pin=%s", r[p].HeaderRoute)
			}
			b.WriteString(" }")
		}
	}
	return b.String()
}

// readyCondition is the DGD's Ready condition, nil when it has none.
func readyCondition(d *v1alpha1.DynamoGraphDeployment) *metav1.Condition {
	return meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionReady)
}

// holdPodDeletion refuses every DELETE of pod ns/name with a ValidatingAdmissionPolicy
// until the returned function (also a cleanup of the spec) removes it: the garbage
// collector's delete of the pod fails and is retried, so the pod outlives its
// ReplicaSet and Deployment and runs on, as a pod a kubelet still stops does (a
// frontend's terminationGracePeriodSeconds is 60). It returns once a dry run of the
// delete is refused.
func holdPodDeletion(ns, name string) (release func()) {
	GinkgoHelper()
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "hold-" + ns},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Delete},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				}}}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("oldObject.metadata.name != %q", name),
				Message:    "held by the test: the pod is still stopping",
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "hold-" + ns},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
		},
	}
	Expect(k8s.Create(ctx, policy)).To(Succeed())
	Expect(k8s.Create(ctx, binding)).To(Succeed())
	release = func() {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, binding))).To(Succeed())
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, policy))).To(Succeed())
	}
	DeferCleanup(release)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	Eventually(func() error { return k8s.Delete(ctx, pod, client.DryRunAll) }).Should(MatchError(ContainSubstring("held by the test")))
	return release
}

var _ = Describe("Cohorts: the prelude waits for the shared frontend's pods", func() {
	It("starts no worker of the new revision while a pod of the shared frontend runs, its Deployment gone", func() {
		Skip("operator bug (controllers/observe.go podsWithoutWorkload, for the lead): pods of a stable workload whose object is gone are not " +
			"counted (it skips keys without a hash), so the prelude ends as soon as the shared frontend's Deployment is deleted (background " +
			"propagation: its ReplicaSet and pods go after it) and revision 2's workers start beside the shared frontend's pod still running: " +
			"test/observe reports \"cohort discovery: shared frontend pod ... runs beside workers of 2 revisions while the DGD has cohorts\" (seen " +
			"once by chance in a Gateway spec, made certain here by refusing the pod's deletion for a while). Remove this Skip once fixed.")
		s := start(gpus(upgradable(newNamespace(), "linger", 2, 1).Obj()))
		var shared string
		for _, p := range s.pods() {
			if p.Labels[v1alpha1.LabelService] == "Frontend" && p.Labels[v1alpha1.LabelWorkerHash] == "" && p.Labels[v1alpha1.LabelTrafficProxy] == "" {
				shared = p.Name
			}
		}
		Expect(shared).NotTo(BeEmpty(), "the shared frontend's pod")
		release := holdPodDeletion(s.ns, shared)
		s.update(dynamoUpgrade("1.7.0"))
		s.until("the shared frontend's Deployment gone, its pod left", func(d *v1alpha1.DynamoGraphDeployment, pods []corev1.Pod) bool {
			_, ok := deploymentsOf(s)[decide.EntryName(d, "Frontend")]
			return !ok && slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Name == shared })
		})
		Consistently(func() []string {
			d := s.dgd()
			var started []string
			for name := range deploymentsOf(s) {
				for _, svc := range d.WorkerServiceNames() {
					if d.Status.UpdateRevisionNumber == 2 && strings.HasPrefix(name, d.Name+"-"+svc+"-"+UpdateHash(d)) {
						started = append(started, name)
					}
				}
			}
			return started
		}, 5*time.Second, 200*time.Millisecond).Should(BeEmpty(), "revision 2's workers while the shared frontend's pod %s runs", shared)
		release()
		s.waitRolledOut(2)
		s.checkCohortsDone()
	})
})
