package proxy_test

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/traffic"
	"github.com/dgd-rollout/operator/traffic/proxy"
)

// Hashes of the stable and the candidate cohort in every test.
const (
	stable    = "6d5f7c1a"
	candidate = "9b0e44f2"
)

// trafficOf is the split of graph ns1/llm's frontend Frontend between the stable and
// the candidate cohort, weights as given, changed by opts.
func trafficOf(stableWeight, candidateWeight int32, opts ...func(*traffic.Traffic)) traffic.Traffic {
	t := traffic.Traffic{
		DGD:      &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "llm"}},
		Frontend: "Frontend",
		Entry:    "llm-frontend",
		Cohorts: []traffic.Cohort{
			{Hash: stable, Service: "llm-frontend-" + stable, Address: "10.96.12.7", Port: 8000, Weight: stableWeight},
			{Hash: candidate, Service: "llm-frontend-" + candidate, Address: "10.96.40.3", Port: 8000, Weight: candidateWeight},
		},
		Config: traffic.Config{AgentImage: "registry.example.com/dgd-rollout:0.2.0"},
	}
	for _, o := range opts {
		o(&t)
	}
	return t
}

func withHeaderRoute(name, value string) func(*traffic.Traffic) {
	return func(t *traffic.Traffic) {
		t.HeaderRoute = &traffic.HeaderRoute{Name: name, Value: value, Hash: candidate}
	}
}

func withoutAddress(hash string) func(*traffic.Traffic) {
	return func(t *traffic.Traffic) {
		for i := range t.Cohorts {
			if t.Cohorts[i].Hash == hash {
				t.Cohorts[i].Address = ""
			}
		}
	}
}

func withProxy(p v1alpha1.ProxyRouting) func(*traffic.Traffic) {
	return func(t *traffic.Traffic) { t.Spec.Proxy = &p }
}

// observed is what the controller reads: the status ConfigMap with reports by pod,
// the Deployment with ready replicas, and the pods.
type observed struct {
	reports map[string]string
	ready   int32
	pods    []metav1.PartialObjectMetadata
}

func (b observed) build(t traffic.Traffic) traffic.Observed {
	objs := map[string]client.Object{
		traffic.Key("Deployment", proxy.Name(t)): &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: proxy.Name(t)},
			Status: appsv1.DeploymentStatus{ReadyReplicas: b.ready}},
	}
	if b.reports != nil {
		objs[traffic.Key("ConfigMap", proxy.StatusName(t))] = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: proxy.StatusName(t)}, Data: b.reports}
	}
	return traffic.Observed{Objects: objs, Pods: b.pods, Now: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)}
}

func pod(name string) metav1.PartialObjectMetadata {
	return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func terminating(name string) metav1.PartialObjectMetadata {
	p := pod(name)
	p.DeletionTimestamp = ptr.To(metav1.NewTime(time.Date(2026, 11, 27, 9, 59, 0, 0, time.UTC)))
	return p
}

// report is an agent's report as the agent writes it.
type report struct {
	version  string
	weights  map[string]int32
	inFlight map[string]int64
	removing []string
	pinned   string
	err      string
}

func (r report) json() string {
	rep := proxy.Report{Version: r.version, Time: time.Date(2026, 11, 27, 9, 59, 30, 0, time.UTC),
		Cohorts: map[string]proxy.CohortReport{}, Error: r.err, HeaderRoute: r.pinned}
	for h, w := range r.weights {
		c := rep.Cohorts[h]
		c.Weight = w
		rep.Cohorts[h] = c
	}
	for h, n := range r.inFlight {
		c := rep.Cohorts[h]
		c.InFlight = n
		rep.Cohorts[h] = c
	}
	for _, h := range r.removing {
		c := rep.Cohorts[h]
		c.Removing = true
		rep.Cohorts[h] = c
	}
	return mustJSON(rep)
}
