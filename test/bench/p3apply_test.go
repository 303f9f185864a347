package bench

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/dgd-rollout/operator/api/conversion"
	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/test/harness"
)

// BenchmarkP3Apply is issue 39's arm of P3: the N graphs server-side applied, as a
// user's `kubectl apply --server-side` or a GitOps tool applies manifests, once as
// v1beta1 manifests (the storage version) and once as v1alpha1 ones (Dynamo's examples),
// each into a new namespace, on P3's control plane with the operator running and the
// conversion webhook served in this process. Each arm times the N applies (32 at a
// time) until the last answer, and then until every graph is deployed; it counts the
// webhook's conversions and the operator's status writes. P3_APPLY_ORDER=v1alpha1
// runs the v1alpha1 arm first. Target (issue 39): the v1alpha1 apply ≤ 1.2 of the
// v1beta1 apply.
func BenchmarkP3Apply(b *testing.B) {
	n := 500
	if v, err := strconv.Atoi(os.Getenv("P3_N")); err == nil && v > 0 {
		n = v
	}
	order := []string{"apply-v1beta1", "apply-v1alpha1"}
	if os.Getenv("P3_APPLY_ORDER") == "v1alpha1" {
		order[0], order[1] = order[1], order[0]
	}
	runP3Arms(b, n, b.N, 0, p3Unrelated{}, order, func(r *p3Run) {
		byVersion := map[string]applyResult{}
		for _, a := range r.applied {
			byVersion[a.version] = a
			a.print(r.n)
		}
		beta, alpha := byVersion["v1beta1"], byVersion["v1alpha1"]
		ratio := alpha.apply.Seconds() / beta.apply.Seconds()
		b.ReportMetric(beta.apply.Seconds(), "apply-v1beta1-s")
		b.ReportMetric(alpha.apply.Seconds(), "apply-v1alpha1-s")
		b.ReportMetric(ratio, "apply-ratio")
		b.ReportMetric(alpha.deployed.Seconds()/beta.deployed.Seconds(), "deployed-ratio")
		fmt.Printf("P3 apply (N=%d): v1alpha1 apply ÷ v1beta1 apply %.2f (target <= 1.2); until deployed %.2f\n",
			r.n, ratio, alpha.deployed.Seconds()/beta.deployed.Seconds())
	})
}

// applyResult is one apply arm.
type applyResult struct {
	version         string
	apply, deployed time.Duration   // the N applies' last answer; every graph deployed (from the first apply)
	latencies       []time.Duration // each apply's answer time
	// conversions the webhook answered over the applies, and until deployed; the API
	// server's own count and total time of its calls over the applies.
	convApply, convDeployed float64
	apiConv                 float64
	apiConvSeconds          float64
	handlerSeconds          float64  // this process's webhook handler time over the applies (its own metric)
	handshakes              float64  // the webhook server's TLS handshakes over the applies (connections the API server opened)
	cpu                     cpuTimes // CPU seconds per process over the applies
	statusWrites            int      // the operator's DGD status writes until deployed
	statusTook              time.Duration
}

func (a applyResult) print(n int) {
	sort.Slice(a.latencies, func(i, j int) bool { return a.latencies[i] < a.latencies[j] })
	fmt.Printf(`P3 apply %s (N=%d, %d at a time): applies %.1fs (each p50 %s, p99 %s), every graph deployed %.1fs
    conversion webhook requests: %.2f per graph over the applies (the API server: %.0f calls, %.3fs each; the handler %.4fs each; %.0f TLS handshakes), %.2f per graph until deployed
    CPU seconds over the applies: %s
    operator status writes until deployed: %.2f per graph (%s each)
`, a.version, n, p3Workers, a.apply.Seconds(), percentile(a.latencies, 50).Round(time.Millisecond), percentile(a.latencies, 99).Round(time.Millisecond),
		a.deployed.Seconds(), a.convApply/float64(n), a.apiConv, a.apiConvSeconds/max(a.apiConv, 1), a.handlerSeconds/max(a.convApply, 1), a.handshakes, a.convDeployed/float64(n), a.cpu.line(),
		float64(a.statusWrites)/float64(n), (a.statusTook / time.Duration(max(a.statusWrites, 1))).Round(time.Millisecond))
}

// applyManifest is graph i as a user's manifest of version: the object P3's graphs
// arm creates, without status, as unstructured (what kubectl sends).
func applyManifest(b testing.TB, ns string, i int, version string) *unstructured.Unstructured {
	alpha := harness.NewDGD(ns, fmt.Sprintf("g%04d", i)).Disagg(2, 1, "vllm:v1").Rollout("1", "0").Backend(v1alpha1.BackendDeployment).Obj()
	var obj runtime.Object = alpha
	gv := v1alpha1.GroupVersion
	if version == "v1beta1" {
		beta := &v1beta1.DynamoGraphDeployment{}
		if err := conversion.ToHub(alpha, beta); err != nil {
			b.Fatal(err)
		}
		obj, gv = beta, v1beta1.GroupVersion
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		b.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	u.SetAPIVersion(gv.String())
	u.SetKind("DynamoGraphDeployment")
	return u
}

// applyArm applies the N graphs as version manifests into a new namespace and measures.
func (r *p3Run) applyArm(b testing.TB, version string) applyResult {
	ctx := context.Background()
	ns := fmt.Sprintf("p3-apply-%s-%d", strings.TrimPrefix(version, "v1"), r.round)
	if err := r.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	c := r.watch(b, ns)
	defer c.stop()
	res := applyResult{version: version}
	manifests := make([]*unstructured.Unstructured, r.n)
	for i := range manifests {
		manifests[i] = applyManifest(b, ns, i, version)
	}
	var mu sync.Mutex
	conv0, handler0, hs0 := conversions(), webhookSeconds(), testutil.ToFloat64(app.WebhookHandshakes)
	cpu0 := processCPU()
	apiN0, apiS0 := apiConversions(b, r)
	begin := time.Now()
	if err := parallel(r.n, func(i int) error {
		t := time.Now()
		err := r.k8s.Patch(ctx, manifests[i], client.Apply, client.FieldOwner("kubectl"), client.ForceOwnership)
		mu.Lock()
		res.latencies = append(res.latencies, time.Since(t))
		mu.Unlock()
		return err
	}); err != nil {
		b.Fatal(err)
	}
	res.apply = time.Since(begin)
	res.convApply, res.handlerSeconds = conversions()-conv0, webhookSeconds()-handler0
	res.handshakes, res.cpu = testutil.ToFloat64(app.WebhookHandshakes)-hs0, cpu0.since()
	apiN1, apiS1 := apiConversions(b, r)
	res.apiConv, res.apiConvSeconds = apiN1-apiN0, apiS1-apiS0
	r.waitFor(b, "apply "+version+": every graph deployed", func() bool { return c.graphsDone(r.n, 1) })
	res.deployed = time.Since(begin)
	res.convDeployed = conversions() - conv0
	for _, q := range r.proxy.Requests(begin) {
		if q.Write() && q.Namespace == ns && q.Resource == "dynamographdeployments/status" {
			res.statusWrites++
			res.statusTook += q.Took
		}
	}
	r.deleteNamespace(b, ns, c)
	return res
}

// apiConversions reads kube-apiserver's count and total seconds of its calls to CRD
// conversion webhooks (apiserver_crd_conversion_webhook_duration_seconds,
// apiextensions-apiserver pkg/apiserver/conversion/metrics.go).
func apiConversions(b testing.TB, r *p3Run) (count, seconds float64) {
	var buf strings.Builder
	if err := r.cl.Fetch(context.Background(), "kube-apiserver", "/metrics", time.Minute, &buf); err != nil {
		b.Fatalf("kube-apiserver metrics: %v", err)
	}
	for _, line := range strings.Split(buf.String(), "\n") {
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		end := strings.LastIndexByte(rest, '}')
		if end < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest[end+1:]), 64)
		if err != nil {
			continue
		}
		switch name {
		case "apiserver_crd_conversion_webhook_duration_seconds_count":
			count += v
		case "apiserver_crd_conversion_webhook_duration_seconds_sum":
			seconds += v
		}
	}
	return count, seconds
}

// webhookSeconds is the total time this process's webhook handlers took
// (controller-runtime's controller_runtime_webhook_latency_seconds, summed).
func webhookSeconds() float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, f := range families {
		if f.GetName() == "controller_runtime_webhook_latency_seconds" {
			for _, m := range f.GetMetric() {
				sum += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return sum
}

// line is c's processes, the busiest first, and their total.
func (c cpuTimes) line() string {
	var parts []string
	var total float64
	for _, k := range busiest(c) {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, c[k]))
		total += c[k]
	}
	return fmt.Sprintf("total %.1f; %s", total, strings.Join(parts, ", "))
}
