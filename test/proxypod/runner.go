package proxypod

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// RunnerOptions say which pods a Runner runs and how.
type RunnerOptions struct {
	// Config is an admin's: it watches pods and requests the ServiceAccount tokens.
	Config *rest.Config
	// Namespace limits the runner to one namespace; "" is every namespace.
	Namespace string
	// Manager is the manager binary built from this tree (opproc.Build).
	Manager string
	// HAProxy is the haproxy to run; "" looks it up on PATH.
	HAProxy string
	// Grace bounds HAProxy's soft stop when its pod goes (a pod's
	// terminationGracePeriodSeconds, default 10 s here: the rendered one is the drain
	// timeout, an hour by default, and nothing a test sends lasts that long).
	Grace time.Duration
}

// Runner runs, for every pod of a proxy Deployment the cluster runs (label
// v1alpha1.LabelTrafficProxy "true", scheduled to a node, not terminating), its two
// containers as local processes (Start), and stops them (Pod.Stop) when the pod
// terminates or goes: what a kubelet would do where KWOK starts no container. Each pod
// runs under a token of its own ServiceAccount bound to the pod (TokenRequest with a
// boundObjectRef, as a projected token is), so the agent has the rendered Role's
// permissions and nothing else, and loses them with its pod.
//
// The cohort addresses a split names are ClusterIPs that nothing routes on this
// machine: HAProxy never reaches a cohort, but the agents apply every split to it and
// report it, which is what the operator reads (traffic/proxy Effect).
type Runner struct {
	opts    RunnerOptions
	cs      kubernetes.Interface
	ca      []byte
	cancel  context.CancelFunc
	stopped chan struct{}
	wg      sync.WaitGroup

	mu      sync.Mutex
	running map[types.UID]*run
	errs    []string
	started int
	done    []string // pods stopped, ns/name, in order
}

// run is one pod's processes, starting, running or stopping.
type run struct {
	key    string // namespace/name
	cancel context.CancelFunc
	pod    *Pod // set once started
}

// Run starts a runner; its pods run until their pods go or Stop.
func Run(ctx context.Context, o RunnerOptions) (*Runner, error) {
	if o.Grace == 0 {
		o.Grace = 10 * time.Second
	}
	cs, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return nil, err
	}
	ca := o.Config.CAData
	if len(ca) == 0 && o.Config.CAFile != "" {
		if ca, err = os.ReadFile(o.Config.CAFile); err != nil {
			return nil, err
		}
	}
	r := &Runner{opts: o, cs: cs, ca: ca, running: map[types.UID]*run{}, stopped: make(chan struct{})}
	ctx, r.cancel = context.WithCancel(ctx)
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(o.Namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = labels.SelectorFromSet(labels.Set{v1alpha1.LabelTrafficProxy: "true"}).String()
		}))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.sync(ctx, o, false) },
		UpdateFunc: func(_, o any) { r.sync(ctx, o, false) },
		DeleteFunc: func(o any) { r.sync(ctx, o, true) },
	}); err != nil {
		r.cancel()
		return nil, err
	}
	f.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		r.cancel()
		return nil, fmt.Errorf("proxy pod runner: the pod cache did not sync")
	}
	go func() { <-ctx.Done(); f.Shutdown(); close(r.stopped) }()
	return r, nil
}

// sync starts a scheduled live pod not yet running and stops one terminating or gone.
func (r *Runner) sync(ctx context.Context, obj any, deleted bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	cur := r.running[pod.UID]
	switch live := !deleted && pod.DeletionTimestamp == nil; {
	case live && cur == nil && pod.Spec.NodeName != "":
		r.start(ctx, pod.DeepCopy())
	case !live && cur != nil:
		delete(r.running, pod.UID)
		cur.cancel()
	}
}

// start runs pod in the background; its run is cancelled (and its processes stopped)
// when the pod goes or the runner stops. Called with r.mu held.
func (r *Runner) start(ctx context.Context, pod *corev1.Pod) {
	ctx, cancel := context.WithCancel(ctx)
	ru := &run{key: pod.Namespace + "/" + pod.Name, cancel: cancel}
	r.running[pod.UID] = ru
	r.started++
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		p, err := r.startPod(ctx, pod)
		if err != nil {
			if ctx.Err() == nil {
				r.fail(fmt.Sprintf("pod %s: %v", ru.key, err))
			}
			return
		}
		r.mu.Lock()
		ru.pod = p
		r.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-p.Agent().Done():
			r.fail(fmt.Sprintf("pod %s: the agent exited: %v\n%s", ru.key, p.Agent().Err(), p.Tail("agent")))
			<-ctx.Done()
		case <-p.HAProxy().Done():
			r.fail(fmt.Sprintf("pod %s: HAProxy exited: %v\n%s", ru.key, p.HAProxy().Err(), p.Tail("haproxy")))
			<-ctx.Done()
		}
		p.Stop(r.opts.Grace)
		r.mu.Lock()
		r.done = append(r.done, ru.key)
		r.mu.Unlock()
	}()
}

// startPod writes the pod's kubeconfig and starts its containers.
func (r *Runner) startPod(ctx context.Context, pod *corev1.Pod) (*Pod, error) {
	dir, err := ShortTempDir()
	if err != nil {
		return nil, err
	}
	kubeconfig, err := r.kubeconfig(ctx, pod, dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	p, err := Start(ctx, pod.Namespace, pod.Name, pod.Spec, Options{Manager: r.opts.Manager, HAProxy: r.opts.HAProxy, Kubeconfig: kubeconfig, Dir: dir})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	p.ownDir = true
	return p, nil
}

// kubeconfig writes, in dir, a kubeconfig for the pod's ServiceAccount with a token
// bound to the pod, as the rendered projected volume's (3607 s).
func (r *Runner) kubeconfig(ctx context.Context, pod *corev1.Pod, dir string) (string, error) {
	sa := pod.Spec.ServiceAccountName
	tr, err := r.cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(3607)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token of ServiceAccount %s/%s for pod %s: %w", pod.Namespace, sa, pod.Name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: r.opts.Config.Host, CertificateAuthorityData: r.ca}
	cfg.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "sa"}
	cfg.CurrentContext = "c"
	path := filepath.Join(dir, "kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

func (r *Runner) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, msg)
}

// Errors are the pods that did not start, and the processes that exited while their
// pod ran, first first.
func (r *Runner) Errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// Running are the pods (namespace/name) whose containers run now, sorted.
func (r *Runner) Running() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ru := range r.running {
		if ru.pod != nil {
			out = append(out, ru.key)
		}
	}
	sort.Strings(out)
	return out
}

// Pod is the running pod namespace/name, nil when none runs.
func (r *Runner) Pod(namespace, name string) *Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ru := range r.running {
		if ru.key == namespace+"/"+name {
			return ru.pod
		}
	}
	return nil
}

// Started counts the pods started so far; Stopped lists those stopped since
// (namespace/name), in order.
func (r *Runner) Started() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started
}

// Stopped lists the pods whose processes were stopped (namespace/name), in order.
func (r *Runner) Stopped() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.done...)
}

// Stop stops watching and stops every pod's processes, and returns once they exited.
func (r *Runner) Stop() {
	r.mu.Lock()
	r.cancel()
	r.mu.Unlock()
	r.wg.Wait()
	<-r.stopped
}
