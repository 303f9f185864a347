package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/dgd-rollout/operator/freeport"
)

// pollInterval is how often readiness is polled during Start.
const pollInterval = 50 * time.Millisecond

// checkTimeout bounds one readiness check (a port clash can put a listener that
// never answers on the port being checked).
const checkTimeout = 2 * time.Second

// startAttempts bounds the restarts after a port clash (another process took a port
// between choosing it and the component binding it).
const startAttempts = 3

// serve starts component name on nports fresh ports (args builds its flags from
// them), waits until healthy succeeds, and on a port clash retries on new ports.
func (c *Cluster) serve(ctx context.Context, name string, nports int,
	args func(ports []int) []string, healthy func(ctx context.Context, ports []int) error) ([]int, error) {
	for attempt := 1; ; attempt++ {
		ports, err := pickPorts(nports)
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
		exited := p.exited()
		p.stop(stopGrace)
		if attempt < startAttempts && exited && clashed(p) {
			continue
		}
		return nil, fmt.Errorf("%s: %w; last output:\n%s", name, err, lastLines(p.tail.String(), 30))
	}
}

// clashed reports whether p failed to bind a port.
func clashed(p *process) bool {
	return strings.Contains(p.tail.String(), "address already in use")
}

// errGiveUp, from a health check, ends waitHealthy at once.
var errGiveUp = errors.New("a component it depends on exited")

// waitHealthy polls healthy until it succeeds or returns errGiveUp, the process
// exits or ctx ends.
func waitHealthy(ctx context.Context, p *process, healthy func(context.Context) error) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		err := checkOnce(ctx, p, healthy)
		if err == nil || errors.Is(err, errGiveUp) {
			return err
		}
		select {
		case <-p.Done():
			return fmt.Errorf("exited (%v)", p.Err())
		case <-ctx.Done():
			return fmt.Errorf("not healthy: %w (last check: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// pickPorts is freePorts; tests replace it to provoke a port clash.
var pickPorts = freePorts

// checkOnce runs healthy with checkTimeout, cut short if p exits.
func checkOnce(ctx context.Context, p *process, healthy func(context.Context) error) error {
	check, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	go func() {
		select {
		case <-p.Done():
			cancel()
		case <-check.Done():
		}
	}()
	return healthy(check)
}

// freePorts returns n distinct free TCP ports on 127.0.0.1 (freeport.PickN).
func freePorts(n int) ([]int, error) { return freeport.PickN(n) }

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
