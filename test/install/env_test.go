package install

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/freeport"
	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/e2e"
	"github.com/dgd-rollout/operator/test/lws"
	"github.com/dgd-rollout/operator/test/opproc"
)

// env is what the install tests share: one local control plane and one manager binary.
type env struct {
	cl  *cluster.Cluster
	k8s client.Client
	cs  kubernetes.Interface
	dir string
	bin string
}

var (
	setupOnce sync.Once
	shared    *env
	setupErr  error
)

// TestMain stops the shared control plane once every test ran (its components also die
// with the test binary: Pdeathsig).
func TestMain(m *testing.M) {
	ctrllog.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	if shared != nil {
		_ = shared.cl.Stop()
		_ = os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// getEnv starts the control plane and builds the manager once, or skips when the
// control-plane binaries are missing.
func getEnv(t *testing.T) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the local control plane")
	}
	if _, err := os.Stat(filepath.Join(cluster.RepoRoot(), "bin", "kube-controller-manager")); err != nil {
		t.Skip("bin/kube-controller-manager is missing: run make cluster-bins")
	}
	setupOnce.Do(func() {
		e := &env{}
		if e.dir, setupErr = os.MkdirTemp("", "dgd-install-"); setupErr != nil {
			return
		}
		shared = e
		if e.bin, setupErr = managerBinary(); setupErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if e.cl, setupErr = cluster.Start(ctx, cluster.Options{Nodes: 2, GPUsPerNode: 8, PodReadyDelay: 500 * time.Millisecond}); setupErr != nil {
			return
		}
		if e.k8s, setupErr = client.New(e.cl.Config, client.Options{Scheme: app.NewScheme()}); setupErr != nil {
			return
		}
		// The invariant watcher (e2e.Watch) watches LeaderWorkerSets too.
		if setupErr = e.cl.InstallCRDs(ctx, lws.CRDPaths()...); setupErr != nil {
			return
		}
		e.cs, setupErr = kubernetes.NewForConfig(e.cl.Config)
	})
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	return shared
}

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// managerBinary builds cmd/manager once for the package's tests (removed by TestMain).
func managerBinary() (string, error) {
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "dgd-install-bin-"); buildErr == nil {
			binPath, buildErr = opproc.Build(cluster.RepoRoot(), binDir)
		}
	})
	return binPath, buildErr
}

// saKubeconfig writes a kubeconfig that authenticates as ServiceAccount ns/name with a
// token from the TokenRequest API, as a pod's projected token does.
func (e *env) saKubeconfig(t *testing.T, ns, name string) string {
	t.Helper()
	tr, err := e.cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of ServiceAccount %s/%s: %v", ns, name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: e.cl.Server, CertificateAuthorityData: e.cl.Config.CAData}
	cfg.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "sa"}
	cfg.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), ns+"-"+name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func ptr[T any](v T) *T { return &v }

// container is one container of a rendered pod, run from the manager binary on this
// machine: what a kubelet would run, with the differences a pod's network and files
// make, and nothing else:
//   - the image's /manager is the binary built from this tree;
//   - every ":port" bind address becomes a free 127.0.0.1 port (other tests run beside
//     this one), recorded by container port so probes can be resolved;
//   - every volume mount is a new temporary directory, substituted in the args;
//   - env entries are resolved as the kubelet does (value, or fieldRef metadata.namespace
//     and metadata.name: the Pod object startPod makes, podName);
//   - the API server is reached with the pod's ServiceAccount token (kubeconfig).
type container struct {
	spec    corev1.Container
	args    []string
	env     []string
	ports   map[int32]int // container port -> local port
	log     string
	proc    *cluster.Child
	logFile *os.File
}

// podName is the name of the Pod object startPod makes for the manager it runs (the
// operator reads its own pod for its image: cmd/manager/app ownImage).
const podName = "dgd-rollout-manager-under-test"

var bindFlags = []string{"--metrics-bind-address=", "--health-probe-bind-address=", "--webhook-bind-address=", "--pprof-bind-address="}

func prepare(t *testing.T, c corev1.Container, ns, kubeconfig string, extra ...string) *container {
	t.Helper()
	r := &container{spec: c, ports: map[int32]int{}}
	if len(c.Command) == 0 || c.Command[0] != "/manager" {
		t.Fatalf("container %s runs %v, not the image's /manager", c.Name, c.Command)
	}
	vars := map[string]string{}
	for _, ev := range c.Env {
		switch {
		case ev.ValueFrom == nil:
			vars[ev.Name] = ev.Value
		case ev.ValueFrom.FieldRef != nil && ev.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			vars[ev.Name] = ns
		case ev.ValueFrom.FieldRef != nil && ev.ValueFrom.FieldRef.FieldPath == "metadata.name":
			vars[ev.Name] = podName
		default:
			t.Fatalf("env %s: the test resolves no %+v", ev.Name, ev.ValueFrom)
		}
	}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if _, ours := vars[name]; !ours && name != "KUBECONFIG" {
			r.env = append(r.env, kv)
		}
	}
	r.env = append(r.env, "KUBECONFIG="+kubeconfig)
	for _, ev := range c.Env {
		r.env = append(r.env, ev.Name+"="+vars[ev.Name])
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = t.TempDir()
		used := false
		for _, a := range c.Args {
			used = used || strings.Contains(a, m.MountPath)
		}
		if !used {
			// The binary would use the mount through a default path of its own, which this
			// machine's other tests share.
			t.Fatalf("container %s mounts %s, which no arg names", c.Name, m.MountPath)
		}
	}
	for _, a := range append(append(append([]string{}, c.Command[1:]...), c.Args...), extra...) {
		a = expand(a, vars)
		for _, f := range bindFlags {
			if v, ok := strings.CutPrefix(a, f); ok && strings.HasPrefix(v, ":") {
				p, err := strconv.Atoi(v[1:])
				if err != nil {
					t.Fatalf("%s: %v", a, err)
				}
				r.ports[int32(p)] = freePort(t)
				a = f + "127.0.0.1:" + strconv.Itoa(r.ports[int32(p)])
			}
		}
		for path, dir := range mounts {
			a = strings.ReplaceAll(a, path, dir)
		}
		r.args = append(r.args, a)
	}
	r.log = filepath.Join(t.TempDir(), c.Name+".log")
	return r
}

// expand replaces $(NAME) by the container's variable NAME, as the kubelet expands
// command and args ($$ escapes; an unknown name stays as written).
func expand(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '$' && i+1 < len(s) {
			if s[i+1] == '$' {
				b.WriteByte('$')
				i++
				continue
			}
			if s[i+1] == '(' {
				if end := strings.IndexByte(s[i:], ')'); end > 0 {
					if v, ok := vars[s[i+2:i+end]]; ok {
						b.WriteString(v)
						i += end
						continue
					}
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// freePort is a free 127.0.0.1 port for a container's process to bind (freeport.Pick).
func freePort(t *testing.T) int {
	t.Helper()
	p, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *env) start(t *testing.T, r *container) {
	t.Helper()
	f, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e.bin, r.args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = r.env, f, f
	if r.proc, err = cluster.StartChild(cmd); err != nil {
		t.Fatal(err)
	}
	r.logFile = f
	t.Cleanup(func() { r.stop() })
}

func (r *container) stop() {
	if r.proc != nil {
		r.proc.Stop(10 * time.Second)
		_ = r.logFile.Close()
	}
}

func (r *container) tail(n int) string {
	b, _ := os.ReadFile(r.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// run runs an init container to completion (a minute at most), which must succeed.
func (e *env) run(t *testing.T, r *container) {
	t.Helper()
	if err := e.runErr(t, r); err != nil {
		t.Fatalf("init container %s: %v\n%s", r.spec.Name, err, r.tail(30))
	}
}

// runErr runs an init container to completion (a minute at most) and returns its exit.
func (e *env) runErr(t *testing.T, r *container) error {
	t.Helper()
	e.start(t, r)
	select {
	case <-r.proc.Done():
	case <-time.After(time.Minute):
		t.Fatalf("init container %s still running after a minute:\n%s", r.spec.Name, r.tail(30))
	}
	return r.proc.Err()
}

// localPort is the local port of a probe's port (a name or number of the container's).
func (r *container) localPort(t *testing.T, p corev1.ContainerPort) int {
	t.Helper()
	lp, ok := r.ports[p.ContainerPort]
	if !ok {
		t.Fatalf("container port %d (%s) is bound by no flag", p.ContainerPort, p.Name)
	}
	return lp
}

func (r *container) port(t *testing.T, nameOrNumber string) int {
	t.Helper()
	for _, p := range r.spec.Ports {
		if p.Name == nameOrNumber || strconv.Itoa(int(p.ContainerPort)) == nameOrNumber {
			return r.localPort(t, p)
		}
	}
	t.Fatalf("container %s has no port %s", r.spec.Name, nameOrNumber)
	return 0
}

// waitReady polls the container's readiness probe as a kubelet does until it succeeds.
func (r *container) waitReady(t *testing.T) {
	t.Helper()
	probe := r.spec.ReadinessProbe
	if probe == nil || probe.HTTPGet == nil {
		t.Fatalf("container %s has no HTTP readiness probe", r.spec.Name)
	}
	u := fmt.Sprintf("http://127.0.0.1:%d%s", r.port(t, probe.HTTPGet.Port.String()), probe.HTTPGet.Path)
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(u)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if r.proc.Exited() || time.Now().After(deadline) {
			t.Fatalf("container %s not ready at %s (%v):\n%s", r.spec.Name, u, err, r.tail(40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logHas reports the log lines containing s.
func (r *container) logHas(s string) []string {
	b, _ := os.ReadFile(r.log)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

func (e *env) crd(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var c apiextensionsv1.CustomResourceDefinition
	if err := e.k8s.Get(context.Background(), client.ObjectKey{Name: app.CRDName}, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

// deleteCRD deletes the DGD CRD if present and waits until it is gone.
func (e *env) deleteCRD(t *testing.T) {
	t.Helper()
	e.deleteCRDNamed(t, app.CRDName)
}

// deleteCRDNamed deletes the CRD name if present and waits until it is gone.
func (e *env) deleteCRDNamed(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	c := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.k8s.Delete(ctx, c); apierrors.IsNotFound(err) {
		return
	} else if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for !apierrors.IsNotFound(e.k8s.Get(ctx, client.ObjectKeyFromObject(c), c)) {
		if time.Now().After(deadline) {
			t.Fatalf("CRD %s not deleted in a minute", name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkWebhook checks what the API server would: the CRD's conversion points at the
// Service svc in ns with a caBundle, and the manager's webhook server (port) presents a
// certificate for the Service's name that the caBundle verifies, and converts a
// v1alpha1 DGD to v1beta1 at /convert. It returns the CA bundle.
func (e *env) checkWebhook(t *testing.T, svc, ns string, port int) []byte {
	t.Helper()
	conv := e.crd(t).Spec.Conversion
	if conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil || conv.Webhook.ClientConfig.Service == nil {
		t.Fatalf("the CRD's conversion points at no Service: %+v", conv)
	}
	cc := conv.Webhook.ClientConfig
	if cc.Service.Name != svc || cc.Service.Namespace != ns || len(cc.CABundle) == 0 {
		t.Fatalf("the CRD's conversion: Service %s/%s with %d bytes of CA, want %s/%s with the webhook's CA", cc.Service.Namespace, cc.Service.Name, len(cc.CABundle), ns, svc)
	}
	review := map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": map[string]any{
		"uid": "install-test", "desiredAPIVersion": "nvidia.com/v1beta1",
		"objects": []any{map[string]any{"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment",
			"metadata": map[string]any{"name": "probe", "namespace": "default"},
			"spec":     map[string]any{"services": map[string]any{"Frontend": map[string]any{"componentType": "frontend", "replicas": 1}}}}},
	}}
	body, _ := json.Marshal(review)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(t, cc.CABundle), ServerName: svc + "." + ns + ".svc"}}}
	resp, err := hc.Post(fmt.Sprintf("https://127.0.0.1:%d/convert", port), "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("the webhook as the API server reaches it (CA from the CRD, name %s.%s.svc): %v", svc, ns, err)
	}
	defer resp.Body.Close()
	var out struct {
		Response struct {
			Result           metav1.Status `json:"result"`
			ConvertedObjects []struct {
				APIVersion string `json:"apiVersion"`
			} `json:"convertedObjects"`
		} `json:"response"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Response.Result.Status != metav1.StatusSuccess || len(out.Response.ConvertedObjects) != 1 || out.Response.ConvertedObjects[0].APIVersion != "nvidia.com/v1beta1" {
		t.Fatalf("/convert answered %+v", out.Response)
	}
	return cc.CABundle
}

func pool(t *testing.T, pem []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		t.Fatal("no certificate in the CA bundle")
	}
	return p
}

// conversionVia stands in for the Service network the local control plane lacks (KWOK
// runs no kube-proxy: the API server cannot reach a ClusterIP): a TLS proxy on 127.0.0.1
// that forwards the API server's /convert calls to the manager's own webhook server,
// verified with the CA the manager put in the CRD and the Service's DNS name, as the API
// server would. The CRD's conversion is pointed at the proxy by URL until the returned
// function restores what the manager had set (and stops the proxy).
func (e *env) conversionVia(t *testing.T, svc, ns string, port int, caBundle []byte) (restore func()) {
	t.Helper()
	ctx := context.Background()
	saved := e.crd(t).Spec.Conversion.DeepCopy()
	local, err := app.LocalWebhook(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(fmt.Sprintf("https://127.0.0.1:%d", port))
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(t, caBundle), ServerName: svc + "." + ns + ".svc"}}
	rp.ErrorLog = log.New(io.Discard, "", 0)
	cert, err := tls.LoadX509KeyPair(filepath.Join(local.CertDir, "tls.crt"), filepath.Join(local.CertDir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", local.BindAddress, &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(l) }()
	ca, err := local.CABundle()
	if err != nil {
		t.Fatal(err)
	}
	e.setConversion(t, app.ConversionConfig(local, ca))
	if err := app.WaitConversion(ctx, e.cl.Config, nil); err != nil {
		t.Fatal(err)
	}
	done := false
	restore = func() {
		if done {
			return
		}
		done = true
		e.setConversion(t, saved)
		_ = srv.Close()
	}
	t.Cleanup(restore)
	return restore
}

func (e *env) setConversion(t *testing.T, conv *apiextensionsv1.CustomResourceConversion) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		c := e.crd(t)
		c.Spec.Conversion = conv
		err := e.k8s.Update(context.Background(), c)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) || attempt > 5 {
			t.Fatal(err)
		}
	}
}

// gpus gives every worker one nvidia.com/gpu, so pods land on the fake GPU nodes.
func gpus(d *v1alpha1.DynamoGraphDeployment) *v1alpha1.DynamoGraphDeployment {
	for _, name := range d.WorkerServiceNames() {
		d.Spec.Services[name].Resources = &v1alpha1.Resources{Limits: &v1alpha1.ResourceItem{GPU: "1"}}
	}
	return d
}

// waitRolledOut waits until DGD ns/name has rolled out revision rev (e2e.RolledOut).
func (e *env) waitRolledOut(t *testing.T, ns, name string, rev int64, op *container) *v1alpha1.DynamoGraphDeployment {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Minute)
	var d v1alpha1.DynamoGraphDeployment
	for {
		var pods corev1.PodList
		err := e.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d)
		if err == nil {
			err = e.k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelGraph: name})
		}
		if err == nil && d.Status.UpdateRevisionNumber == rev && e2e.RolledOut(&d, pods.Items) {
			return &d
		}
		if time.Now().After(deadline) || op.proc.Exited() {
			t.Fatalf("DGD %s/%s did not roll out revision %d: %v %s\noperator:\n%s", ns, name, rev, err, e2e.Summary(&d), op.tail(30))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
