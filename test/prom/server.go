// Package prom runs what the tests of analysis steps query: a real Prometheus server
// (the prometheus on PATH: Debian's package, 2.42, which make test installs when it is
// missing; any 2.42 or later does) on 127.0.0.1,
// scraping an Exporter that serves, for every Ready Dynamo worker pod of the cluster,
// the metrics its runtime would serve (Dynamo's names and labels), with values the
// test chooses per image.
package prom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dgd-rollout/operator/freeport"
	"github.com/dgd-rollout/operator/test/cluster"
)

// Options configure a Server.
type Options struct {
	// Bin is the prometheus binary (default: "prometheus", found on PATH).
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

// Start writes a configuration scraping opts.Targets and starts Prometheus on a free
// port of 127.0.0.1, with its data in a new temporary directory; it returns once the
// server is ready.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Bin == "" {
		opts.Bin = "prometheus"
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
	port, err := freeport.Pick() // Prometheus binds it (freeport: not from the ephemeral range)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
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
		return fmt.Errorf("starting %s (make cluster-bins installs Debian's prometheus): %w", s.opts.Bin, err)
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

// Check runs q as an instant query: nil when the server parses and evaluates it, else
// its error (a query that does not parse, or of the wrong type, is bad_data). Every
// Prometheus since 2.0 serves /api/v1/query; /api/v1/parse_query, which returns the
// syntax tree, is 3.x only.
func (s *Server) Check(ctx context.Context, q string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/api/v1/query",
		strings.NewReader(url.Values{"query": {q}}.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("%s answered %s, not Prometheus' JSON: %w", s.URL, resp.Status, err)
	}
	if body.Status != "success" {
		return errors.New(body.Error)
	}
	return nil
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
