package prom

import (
	"context"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/analysis"
)

// Profile is how the workers of one image behave: every Ready worker pod serves
// RequestsPerSecond requests from the moment it became Ready, ErrorRatio of them fail,
// and every request's time to first token and inter-token latency are TTFT and ITL
// (seconds).
type Profile struct {
	RequestsPerSecond float64
	ErrorRatio        float64
	TTFT, ITL         float64
}

// Healthy is a worker that serves 10 requests per second, none failing, with a 200 ms
// time to first token and a 20 ms inter-token latency.
var Healthy = Profile{RequestsPerSecond: 10, TTFT: 0.2, ITL: 0.02}

// Demo is the behaviour make run and test/e2e give each image: a tag ending in
// "-errors" fails 30% of its requests and has a 0.9 s time to first token; any other
// image is Healthy.
func Demo(image string) Profile {
	if strings.HasSuffix(image, "-errors") {
		return Profile{RequestsPerSecond: 10, ErrorRatio: 0.3, TTFT: 0.9, ITL: 0.05}
	}
	return Healthy
}

// Exporter serves on /metrics, for every Ready Dynamo worker pod of the cluster (a pod
// labelled with a worker hash), the series its Dynamo runtime would serve on its system
// port, as if Prometheus scraped every pod (each series carries the pod's worker_id):
//
//   - dynamo_component_requests_total and dynamo_component_errors_total{error_type=
//     "generate"} (counters; the error series only from a worker's first error, as a
//     labelled counter of a Prometheus CounterVec exists from its first increment, so a
//     query over a healthy canary's errors alone has no sample), dynamo_component_request_duration_seconds (histogram,
//     Prometheus' default buckets), labelled dynamo_namespace (sanitized: '-' → '_'),
//     dynamo_component, dynamo_endpoint="generate", worker_id and model, as
//     lib/runtime/src/pipeline/network/ingress/push_handler/metrics.rs and
//     lib/runtime/src/metrics.rs make them;
//   - vllm:time_to_first_token_seconds and vllm:inter_token_latency_seconds
//     (histograms), re-exported by Dynamo with dynamo_namespace unsanitized and the
//     labels dynamo_component, dynamo_endpoint, worker_id, model and model_name
//     (components/src/dynamo/common/utils/prometheus.py, register_engine_metrics_callback).
//
// The effective namespace is read from the pod's own env (DYN_NAMESPACE and
// DYN_NAMESPACE_WORKER_SUFFIX of its main container), as the runtime reads it
// (components/src/dynamo/common/utils/namespace.py). Values follow Profile(image).
type Exporter struct {
	// Addr is the host:port Prometheus scrapes.
	Addr string
	c    client.Reader
	srv  *http.Server

	mu      sync.Mutex
	profile func(image string) Profile
	now     func() time.Time
}

// StartExporter serves the metrics of the pods c lists on a free port of 127.0.0.1.
// profile decides each image's behaviour (nil: Healthy for every image).
func StartExporter(c client.Reader, profile func(image string) Profile) (*Exporter, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &Exporter{Addr: l.Addr().String(), c: c, now: time.Now}
	e.SetProfile(profile)
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", e.serve)
	e.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = e.srv.Serve(l) }()
	return e, nil
}

// SetProfile changes how each image behaves from now on (nil: Healthy).
func (e *Exporter) SetProfile(profile func(image string) Profile) {
	if profile == nil {
		profile = func(string) Profile { return Healthy }
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.profile = profile
}

// Close stops serving.
func (e *Exporter) Close() error { return e.srv.Close() }

func (e *Exporter) serve(w http.ResponseWriter, r *http.Request) {
	text, err := e.Render(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write([]byte(text))
}

// defaultBuckets are Prometheus' default histogram buckets, which
// dynamo_component_request_duration_seconds uses (it is made with buckets None).
var defaultBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// latencyBuckets stand in for vLLM's TTFT and ITL buckets.
var latencyBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// Render is the text exposition of the metrics of every Ready worker pod now.
func (e *Exporter) Render(ctx context.Context) (string, error) {
	var pods corev1.PodList
	if err := e.c.List(ctx, &pods, client.HasLabels{v1alpha1.LabelWorkerHash}); err != nil {
		return "", err
	}
	e.mu.Lock()
	profile, now := e.profile, e.now()
	e.mu.Unlock()
	series := map[string][]string{} // metric family -> sample lines
	for i := range pods.Items {
		pod := &pods.Items[i]
		since, ok := readySince(pod)
		if !ok || pod.DeletionTimestamp != nil {
			continue
		}
		main := mainContainer(pod)
		if main == nil {
			continue
		}
		ns := envOf(main, v1alpha1.EnvDynNamespace)
		if suffix := envOf(main, v1alpha1.EnvDynNamespaceWorkerSuffix); suffix != "" {
			ns += "-" + suffix
		}
		p := profile(main.Image)
		n := float64(int64(max(now.Sub(since).Seconds(), 0) * p.RequestsPerSecond))
		errs := float64(int64(n * p.ErrorRatio))
		h := fnv.New64a()
		_, _ = h.Write([]byte(pod.UID))
		rt := fmt.Sprintf(`dynamo_namespace=%q,dynamo_component=%q,dynamo_endpoint="generate",worker_id="%x",model="Qwen/Qwen3-0.6B"`,
			analysis.SanitizeLabel(ns), strings.ToLower(pod.Labels[v1alpha1.LabelService]), h.Sum64())
		series["dynamo_component_requests_total counter"] = append(series["dynamo_component_requests_total counter"],
			fmt.Sprintf("dynamo_component_requests_total{%s} %g", rt, n))
		if errs > 0 { // a labelled counter is born at its first increment: no error, no series
			series["dynamo_component_errors_total counter"] = append(series["dynamo_component_errors_total counter"],
				fmt.Sprintf(`dynamo_component_errors_total{%s,error_type="generate"} %g`, rt, errs))
		}
		histogram(series, "dynamo_component_request_duration_seconds", rt, defaultBuckets, n, p.TTFT+p.ITL*100)
		engine := fmt.Sprintf(`dynamo_namespace=%q,dynamo_component=%q,dynamo_endpoint="generate",worker_id="%x",model="Qwen/Qwen3-0.6B",model_name="Qwen/Qwen3-0.6B"`,
			ns, strings.ToLower(pod.Labels[v1alpha1.LabelService]), h.Sum64())
		histogram(series, "vllm:time_to_first_token_seconds", engine, latencyBuckets, n, p.TTFT)
		histogram(series, "vllm:inter_token_latency_seconds", engine, latencyBuckets, n*100, p.ITL)
	}
	var families []string
	for f := range series {
		families = append(families, f)
	}
	sort.Strings(families)
	var b strings.Builder
	for _, f := range families {
		name, kind, _ := strings.Cut(f, " ")
		fmt.Fprintf(&b, "# TYPE %s %s\n", name, kind)
		for _, line := range series[f] {
			b.WriteString(line + "\n")
		}
	}
	return b.String(), nil
}

// histogram adds the lines of a histogram of n observations, each of value v.
func histogram(series map[string][]string, name, labels string, buckets []float64, n, v float64) {
	key := name + " histogram"
	for _, le := range buckets {
		c := 0.0
		if v <= le {
			c = n
		}
		series[key] = append(series[key], fmt.Sprintf(`%s_bucket{%s,le="%g"} %g`, name, labels, le, c))
	}
	series[key] = append(series[key],
		fmt.Sprintf(`%s_bucket{%s,le="+Inf"} %g`, name, labels, n),
		fmt.Sprintf(`%s_sum{%s} %g`, name, labels, n*v),
		fmt.Sprintf(`%s_count{%s} %g`, name, labels, n))
}

// readySince is when the pod last became Ready, if it is Ready.
func readySince(pod *corev1.Pod) (time.Time, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

func mainContainer(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "main" {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

func envOf(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}
