// Package prom runs what the tests of analysis steps query: a real Prometheus server
// (bin/prometheus, built from its pinned Go module by make cluster-bins) on 127.0.0.1,
// scraping an Exporter that serves, for every Ready Dynamo worker pod of the cluster,
// the metrics its runtime would serve (Dynamo's names and labels), with values the
// test chooses per image.
package prom

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/dgd-rollout/operator/test/cluster"
)

// Options configure a Server.
type Options struct {
	// Bin is the prometheus binary (default: bin/prometheus of the repository).
	Bin string
	// Targets are host:port addresses scraped at /metrics.
	Targets []string
	// ScrapeInterval (default 1s).
	ScrapeInterval time.Duration
	// Log receives the server's output (default: discarded).
	Log io.Writer
	// RuleFiles are Prometheus rule files (recording and alerting rules) it loads and
	// evaluates every ScrapeInterval; a file that does not parse stops it from starting.
	RuleFiles []string
}

// Server is a running Prometheus.
type Server struct {
	// URL is http://127.0.0.1:<port>, the address of its HTTP API.
	URL  string
	opts Options
	dir  string
	addr string
	proc *cluster.Child
}

// Binary is the repository's bin/prometheus.
func Binary() string { return filepath.Join(cluster.RepoRoot(), "bin", "prometheus") }

// Start writes a configuration scraping opts.Targets and starts Prometheus on a free
// port of 127.0.0.1, with its data in a new temporary directory; it returns once the
// server is ready.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Bin == "" {
		opts.Bin = Binary()
	}
	if opts.ScrapeInterval == 0 {
		opts.ScrapeInterval = time.Second
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	dir, err := os.MkdirTemp("", "prometheus-")
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_ = l.Close()
	s := &Server{URL: "http://" + addr, opts: opts, dir: dir, addr: addr}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(s.config()), 0o600); err != nil {
		return nil, err
	}
	if err := s.Restart(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) config() string {
	targets := make([]string, len(s.opts.Targets))
	for i, t := range s.opts.Targets {
		targets[i] = fmt.Sprintf("%q", t)
	}
	rules := ""
	for _, f := range s.opts.RuleFiles {
		rules += fmt.Sprintf("- %q\n", f)
	}
	if rules != "" {
		rules = "rule_files:\n" + rules
	}
	return fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
%[3]sscrape_configs:
- job_name: dynamo
  honor_labels: true
  static_configs:
  - targets: [%[2]s]
`, s.opts.ScrapeInterval, strings.Join(targets, ", "), rules)
}

// Restart starts the server (again, after Stop) on the same address and data, and
// waits until it is ready; a running server is left as it is.
func (s *Server) Restart(ctx context.Context) error {
	if s.proc != nil && !s.proc.Exited() {
		return nil // running
	}
	cmd := exec.Command(s.opts.Bin,
		"--config.file="+filepath.Join(s.dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(s.dir, "data"),
		"--storage.tsdb.retention.time=2h",
		"--web.listen-address="+s.addr,
		"--log.level=warn")
	cmd.Stdout, cmd.Stderr = s.opts.Log, s.opts.Log
	proc, err := cluster.StartChild(cmd)
	if err != nil {
		return fmt.Errorf("starting %s (run make cluster-bins): %w", s.opts.Bin, err)
	}
	s.proc = proc
	return s.waitReady(ctx)
}

func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if s.proc.Exited() {
			return errors.New("prometheus exited while starting")
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/-/ready", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			s.Stop()
			return fmt.Errorf("prometheus at %s not ready: %w", s.URL, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop stops the server (SIGTERM, SIGKILL after 5 s) and waits until it has exited:
// its address then refuses connections.
func (s *Server) Stop() {
	if s.proc != nil {
		s.proc.Stop(5 * time.Second)
	}
}

// Close stops the server and removes its data.
func (s *Server) Close() error {
	s.Stop()
	return os.RemoveAll(s.dir)
}
