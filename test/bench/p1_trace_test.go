package bench

// P1's step anatomy, on demand: with P1_TRACE=<prefix> set, each round writes
// <prefix>-<namespace>, a timeline of every pod, ReplicaSet, Deployment and
// EndpointSlice event of the round's namespace as a watch received it and of every
// request the operator made (method, path, the replicas it set), with each timed arm
// between BEGIN and END lines that carry the CPU ticks (1/100 s) of the control plane's
// processes so far; and <prefix>-apiserver-<arm>.pprof, kube-apiserver's CPU profile
// over the first 8 s of each arm (the cluster then serves /debug/pprof). The trace
// costs the rollouts it times a little (one more watch of each kind, and this process'
// work), both arms alike. docs/benchmarks.md reads P1's figures from it.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/dgd-rollout/operator/test/cluster"
)

// tracePrefix is P1_TRACE: where the trace goes, "" for none.
var tracePrefix = os.Getenv("P1_TRACE")

// p1Trace is one round's trace; a nil one records nothing.
type p1Trace struct {
	mu     sync.Mutex
	out    *os.File
	cl     *cluster.Cluster
	cancel context.CancelFunc
}

// activeTrace is the round's trace the operator's transport writes to (nil: none); the
// transport reads it from the operator's goroutines.
var activeTrace atomic.Pointer[p1Trace]

// startTrace starts the round's watches, nil without P1_TRACE.
func startTrace(b interface{ Fatal(...any) }, cl *cluster.Cluster, ns string) *p1Trace {
	if tracePrefix == "" {
		return nil
	}
	f, err := os.Create(tracePrefix + "-" + ns)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &p1Trace{out: f, cl: cl, cancel: cancel}
	cs := kubernetes.NewForConfigOrDie(cl.Config)
	watches := []struct {
		kind  string
		watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
		say   func(any) string
	}{
		{"POD", cs.CoreV1().Pods(ns).Watch, sayPod},
		{"DEP", cs.AppsV1().Deployments(ns).Watch, sayDeployment},
		{"RS", cs.AppsV1().ReplicaSets(ns).Watch, sayReplicaSet},
		{"EPS", cs.DiscoveryV1().EndpointSlices(ns).Watch, saySlice},
	}
	for _, w := range watches {
		wi, err := w.watch(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			defer wi.Stop()
			for ev := range wi.ResultChan() {
				t.printf("%s %s %s", w.kind, ev.Type, w.say(ev.Object))
			}
		}()
	}
	activeTrace.Store(t)
	return t
}

func (t *p1Trace) stop() {
	if t == nil {
		return
	}
	activeTrace.Store(nil)
	t.cancel()
	t.mu.Lock()
	defer t.mu.Unlock()
	_ = t.out.Close()
	t.out = nil
}

func (t *p1Trace) printf(format string, a ...any) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.out != nil {
		fmt.Fprintf(t.out, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000000")}, a...)...)
	}
}

// begin marks an arm's start (with the CPU ticks so far) and profiles kube-apiserver
// over its first 8 s; end marks its end.
func (t *p1Trace) begin(arm string) {
	if t == nil {
		return
	}
	t.printf("BEGIN %s %s", arm, cpuTicks())
	go func() {
		f, err := os.Create(tracePrefix + "-apiserver-" + arm + ".pprof")
		if err != nil {
			return
		}
		defer f.Close()
		if err := t.cl.Profile(context.Background(), "kube-apiserver", 8*time.Second, f); err != nil {
			t.printf("PROFILE %s: %v", arm, err)
		}
	}()
}

func (t *p1Trace) end(arm string) { t.printf("END %s %s", arm, cpuTicks()) }

// request records one of the operator's requests.
func (t *p1Trace) request(r *http.Request) {
	if t == nil {
		return
	}
	replicas := ""
	if r.GetBody != nil {
		if rc, err := r.GetBody(); err == nil {
			body, _ := io.ReadAll(rc)
			if i := bytes.Index(body, []byte(`"replicas"`)); i >= 0 {
				replicas = string(body[i:min(len(body), i+16)])
			}
		}
	}
	t.printf("REQ %s %s %s", r.Method, r.URL.Path, replicas)
}

// response records the answer to one of the operator's requests and how long it took.
func (t *p1Trace) response(r *http.Request, resp *http.Response, took time.Duration) {
	if t == nil {
		return
	}
	code := 0
	if resp != nil {
		code = resp.StatusCode
	}
	t.printf("RSP %s %s %d %.1fms", r.Method, r.URL.Path, code, float64(took.Microseconds())/1000)
}

// cpuTicks lists the user+system ticks of the control plane's processes and this one.
func cpuTicks() string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i, j := strings.Index(s, "("), strings.LastIndex(s, ")")
		if i < 0 || j < 0 || j+2 > len(s) {
			continue
		}
		name, f := s[i+1:j], strings.Fields(s[j+2:])
		if len(f) < 13 || !(strings.HasPrefix(name, "kube") || name == "etcd" || name == "kwok" || strings.HasPrefix(name, "bench")) {
			continue
		}
		ut, _ := strconv.Atoi(f[11])
		st, _ := strconv.Atoi(f[12])
		out = append(out, fmt.Sprintf("%s:%d", name, ut+st))
	}
	return strings.Join(out, " ")
}

func sayPod(o any) string {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return fmt.Sprint(o)
	}
	ready := false
	for _, c := range p.Status.Conditions {
		ready = ready || c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	}
	return fmt.Sprintf("%s node=%q ready=%v del=%v", p.Name, p.Spec.NodeName, ready, p.DeletionTimestamp != nil)
}

func sayDeployment(o any) string {
	d, ok := o.(*appsv1.Deployment)
	if !ok {
		return fmt.Sprint(o)
	}
	return fmt.Sprintf("%s gen=%d obs=%d spec=%d rep=%d ready=%d avail=%d upd=%d", d.Name, d.Generation, d.Status.ObservedGeneration,
		*d.Spec.Replicas, d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.UpdatedReplicas)
}

func sayReplicaSet(o any) string {
	d, ok := o.(*appsv1.ReplicaSet)
	if !ok {
		return fmt.Sprint(o)
	}
	return fmt.Sprintf("%s spec=%d rep=%d ready=%d avail=%d", d.Name, *d.Spec.Replicas, d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas)
}

func saySlice(o any) string {
	s, ok := o.(*discoveryv1.EndpointSlice)
	if !ok {
		return fmt.Sprint(o)
	}
	n := 0
	for _, e := range s.Endpoints {
		if e.Conditions.Ready != nil && *e.Conditions.Ready {
			n++
		}
	}
	return fmt.Sprintf("%s ready=%d total=%d", s.Name, n, len(s.Endpoints))
}
