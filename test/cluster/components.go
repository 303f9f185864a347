package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// pollInterval is how often readiness is polled during Start.
const pollInterval = 50 * time.Millisecond

// startAttempts bounds the restarts after a port clash (another process took a port
// between choosing it and the component binding it).
const startAttempts = 3

// serve starts component name on nports fresh ports (args builds its flags from
// them), waits until healthy succeeds, and on a port clash retries on new ports.
func (c *Cluster) serve(ctx context.Context, name string, nports int,
	args func(ports []int) []string, healthy func(ctx context.Context, ports []int) error) ([]int, error) {
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(nports)
		if err != nil {
			return nil, err
		}
		p, err := c.launch(name, args(ports))
		if err != nil {
			return nil, err
		}
		err = waitHealthy(ctx, p, func(ctx context.Context) error { return healthy(ctx, ports) })
		if err == nil {
			return ports, nil
		}
		if attempt < startAttempts && p.exited() && strings.Contains(p.tail.String(), "address already in use") {
			continue
		}
		p.stop(stopGrace)
		return nil, fmt.Errorf("%s: %w; last output:\n%s", name, err, lastLines(p.tail.String(), 30))
	}
}

// waitHealthy polls healthy until it succeeds, the process exits or ctx ends.
func waitHealthy(ctx context.Context, p *process, healthy func(context.Context) error) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		err := healthy(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("exited (%v)", p.err)
		case <-ctx.Done():
			return fmt.Errorf("not healthy: %w (last check: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// freePorts returns n distinct free TCP ports on 127.0.0.1 (all listened on at once,
// then closed).
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer func() { _ = l.Close() }()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startEtcd starts a single-member etcd with its data in WorkDir/etcd.
func (c *Cluster) startEtcd(ctx context.Context) error {
	dataDir := filepath.Join(c.WorkDir, "etcd")
	args := func(p []int) []string {
		client, peer := url("http", p[0]), url("http", p[1])
		return []string{
			"--name=default", "--data-dir=" + dataDir,
			"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=default=" + peer,
			"--unsafe-no-fsync", "--log-level=warn",
		}
	}
	ports, err := c.serve(ctx, "etcd", 2, args, func(ctx context.Context, p []int) error {
		return httpOK(ctx, http.DefaultClient, url("http", p[0])+"/health")
	})
	if err == nil {
		c.ports["etcd"] = ports[0]
	}
	return err
}

// startAPIServer starts kube-apiserver on etcd and waits for /readyz.
func (c *Cluster) startAPIServer(ctx context.Context) error {
	hc, err := c.adminHTTPClient()
	if err != nil {
		return err
	}
	args := func(p []int) []string {
		return []string{
			"--etcd-servers=" + url("http", c.ports["etcd"]),
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
			"--profiling=false",
		}
	}
	ports, err := c.serve(ctx, "kube-apiserver", 1, args, func(ctx context.Context, p []int) error {
		return httpOK(ctx, hc, url("https", p[0])+"/readyz")
	})
	if err != nil {
		return err
	}
	c.ports["kube-apiserver"] = ports[0]
	c.Server = url("https", ports[0])
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
		return []string{
			"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(p[0]),
			"--tls-cert-file=" + c.pki.servingCert, "--tls-private-key-file=" + c.pki.servingKey,
			"--controllers=*", "--leader-elect=false", "--use-service-account-credentials=true",
			"--service-account-private-key-file=" + c.pki.saKey, "--root-ca-file=" + c.pki.caFile,
			"--cluster-signing-cert-file=" + c.pki.caFile,
			"--cluster-signing-key-file=" + filepath.Join(c.pki.dir, "ca.key"),
			"--service-cluster-ip-range=" + serviceCIDR,
			"--kube-api-qps=500", "--kube-api-burst=1000",
			"--profiling=false",
		}
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
		return []string{
			"--config=" + cfgFile,
			"--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(p[0]),
			"--tls-cert-file=" + c.pki.servingCert, "--tls-private-key-file=" + c.pki.servingKey,
		}
	}
	return c.serveWithHealthz(ctx, "kube-scheduler", args)
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
		c.mu.Lock()
		c.ports[name] = ports[0]
		c.mu.Unlock()
	}
	return err
}

// adminHTTPClient trusts the cluster CA and presents the admin client certificate.
func (c *Cluster) adminHTTPClient() (*http.Client, error) {
	ca, err := os.ReadFile(c.pki.caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	pair, err := tls.LoadX509KeyPair(c.pki.clientFiles("admin"))
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}, nil
}

// httpOK is nil when GET u answers 200.
func httpOK(ctx context.Context, hc *http.Client, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

func url(scheme string, port int) string {
	return fmt.Sprintf("%s://127.0.0.1:%d", scheme, port)
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
