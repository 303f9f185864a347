package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// startStorageAndAPI starts etcd and, without waiting for it, kube-apiserver (which
// retries its etcd connection), then waits for the API server's /readyz. If etcd
// lost a port clash, both start again.
func (c *Cluster) startStorageAndAPI(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		etcd, err := c.launchEtcd()
		if err != nil {
			return err
		}
		err = c.startAPIServer(ctx, etcd)
		if err == nil {
			return nil
		}
		died := etcd.exited()
		etcd.stop(stopGrace)
		if !died {
			return err
		}
		if attempt < startAttempts && clashed(etcd) {
			continue
		}
		return fmt.Errorf("%w\netcd exited (%v); last output:\n%s", err, etcd.err, lastLines(etcd.tail.String(), 30))
	}
}

// launchEtcd starts a single-member etcd with its data in WorkDir/etcd (emptied
// first: every Start is a new cluster), on fresh ports, without waiting for it.
func (c *Cluster) launchEtcd() (*process, error) {
	dataDir := filepath.Join(c.WorkDir, "etcd")
	if err := os.RemoveAll(dataDir); err != nil {
		return nil, err
	}
	ports, err := pickPorts(2)
	if err != nil {
		return nil, err
	}
	client, peer := url("http", ports[0]), url("http", ports[1])
	c.etcdURL = client
	return c.launch("etcd", []string{
		"--name=default", "--data-dir=" + dataDir,
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer,
		"--unsafe-no-fsync", "--log-level=warn",
	})
}

// startAPIServer starts kube-apiserver on etcd and waits for /readyz; it gives up
// early if etcd exits.
func (c *Cluster) startAPIServer(ctx context.Context, etcd *process) error {
	hc, err := c.adminHTTPClient()
	if err != nil {
		return err
	}
	args := func(p []int) []string {
		return []string{
			"--etcd-servers=" + c.etcdURL,
			"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(p[0]),
			"--tls-cert-file=" + c.pki.servingCert, "--tls-private-key-file=" + c.pki.servingKey,
			"--client-ca-file=" + c.pki.caFile,
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + c.pki.saPub,
			"--service-account-signing-key-file=" + c.pki.saKey,
			"--service-cluster-ip-range=" + serviceCIDR,
			"--authorization-mode=Node,RBAC",
			"--endpoint-reconciler-type=none",
			"--allow-privileged=true",
			"--profiling=" + strconv.FormatBool(c.opts.Profiling),
		}
	}
	ports, err := c.serve(ctx, "kube-apiserver", 1, args, func(ctx context.Context, p []int) error {
		if etcd.exited() {
			return errGiveUp
		}
		return httpOK(ctx, hc, url("https", p[0])+"/readyz")
	})
	if err != nil {
		return err
	}
	c.Server = url("https", ports[0])
	c.urls.Store("kube-apiserver", c.Server)
	return nil
}

// writeKubeconfigs writes the admin, kube-controller-manager and kube-scheduler
// kubeconfigs, each with its own client certificate, and builds c.Config.
func (c *Cluster) writeKubeconfigs() error {
	for _, user := range []string{"admin", "kube-controller-manager", "kube-scheduler"} {
		cert, key := c.pki.clientFiles(user)
		if err := c.pki.writeKubeconfig(c.kubeconfig(user), c.Server, cert, key); err != nil {
			return err
		}
	}
	c.Kubeconfig = c.kubeconfig("admin")
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 500, 1000
	c.Config = cfg
	c.client, err = kubernetes.NewForConfig(cfg)
	return err
}

func (c *Cluster) kubeconfig(user string) string {
	return filepath.Join(c.WorkDir, user+".kubeconfig")
}

// startControllerManager starts kube-controller-manager with every default
// controller and waits for its /healthz.
func (c *Cluster) startControllerManager(ctx context.Context) error {
	kc := c.kubeconfig("kube-controller-manager")
	args := func(p []int) []string {
		return slices.Concat(c.delegatedServing(kc, p[0]), []string{
			"--kubeconfig=" + kc,
			"--controllers=*", "--leader-elect=false", "--use-service-account-credentials=true",
			"--service-account-private-key-file=" + c.pki.saKey, "--root-ca-file=" + c.pki.caFile,
			"--cluster-signing-cert-file=" + c.pki.caFile,
			"--cluster-signing-key-file=" + filepath.Join(c.pki.dir, "ca.key"),
			"--service-cluster-ip-range=" + serviceCIDR,
			"--kube-api-qps=500", "--kube-api-burst=1000",
			"--profiling=" + strconv.FormatBool(c.opts.Profiling),
		})
	}
	return c.serveWithHealthz(ctx, "kube-controller-manager", args)
}

// startScheduler starts kube-scheduler (leader election off, from a config file)
// and waits for its /healthz.
func (c *Cluster) startScheduler(ctx context.Context) error {
	kc := c.kubeconfig("kube-scheduler")
	cfgFile := filepath.Join(c.WorkDir, "kube-scheduler.yaml")
	cfg := fmt.Sprintf(schedulerConfig, kc)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		return err
	}
	args := func(p []int) []string {
		return append([]string{"--config=" + cfgFile}, c.delegatedServing(kc, p[0])...)
	}
	return c.serveWithHealthz(ctx, "kube-scheduler", args)
}

// delegatedServing are the HTTPS serving flags of kube-controller-manager and
// kube-scheduler: our serving certificate on 127.0.0.1:port, client certificates
// checked against our CA (--authentication-skip-lookup: without it they read the
// requestheader CA from kube-system/extension-apiserver-authentication and log an
// error every few seconds, since the API server has no front proxy), tokens and
// authorization delegated through kubeconfig kc.
func (c *Cluster) delegatedServing(kc string, port int) []string {
	return []string{
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + c.pki.servingCert, "--tls-private-key-file=" + c.pki.servingKey,
		"--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
		"--authentication-skip-lookup", "--client-ca-file=" + c.pki.caFile,
	}
}

// schedulerConfig is the KubeSchedulerConfiguration; %s is the kubeconfig. With
// --config, the scheduler ignores --kubeconfig, --leader-elect and --kube-api-qps.
const schedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
`

// serveWithHealthz serves a component whose one port is its HTTPS /healthz.
func (c *Cluster) serveWithHealthz(ctx context.Context, name string, args func([]int) []string) error {
	hc, err := c.adminHTTPClient()
	if err != nil {
		return err
	}
	ports, err := c.serve(ctx, name, 1, args, func(ctx context.Context, p []int) error {
		return httpOK(ctx, hc, url("https", p[0])+"/healthz")
	})
	if err == nil {
		c.urls.Store(name, url("https", ports[0]))
	}
	return err
}

// Profile writes a CPU profile of component (kube-apiserver or
// kube-controller-manager) over the next d to w. The cluster must have been started
// with Options.Profiling.
func (c *Cluster) Profile(ctx context.Context, component string, d time.Duration, w io.Writer) error {
	return c.Fetch(ctx, component, fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds())), d+30*time.Second, w)
}

// Fetch writes what GET path answers on component's HTTPS port (kube-apiserver,
// kube-controller-manager, kube-scheduler), as the admin, to w.
func (c *Cluster) Fetch(ctx context.Context, component, path string, timeout time.Duration, w io.Writer) error {
	base, ok := c.urls.Load(component)
	if !ok {
		return fmt.Errorf("no HTTPS endpoint of %s", component)
	}
	hc, err := c.adminHTTPClient()
	if err != nil {
		return err
	}
	hc.Timeout = timeout
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.(string)+path, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s of %s: %s", path, component, resp.Status)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}
