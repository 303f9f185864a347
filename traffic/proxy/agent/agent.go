// Package agent is the proxy agent, `manager proxy-agent`: the native sidecar beside
// HAProxy in every proxy pod. It watches the desired split (the ConfigMap
// `{entry}-proxy`, through the API server with the pod's ServiceAccount), writes
// HAProxy's configuration for it (so HAProxy starts, and restarts, on the current
// split), applies every change to the running HAProxy through its runtime API on the
// UNIX socket in the pod's emptyDir, and reports what HAProxy holds (the status
// ConfigMap `{entry}-proxy-status`, its own key). The design and the formats are in
// package proxy's doc.
//
// The agent keeps no state of its own that matters: each pass reads HAProxy back
// (haproxy.Client.Read), plans the commands that turn it into the split
// (haproxy.Plan), runs them, and reads it again; the split is applied once the state
// read back is the split (haproxy.Check). So a restarted agent, or an HAProxy that
// restarted from its configuration, is caught up by the next pass.
package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/dgd-rollout/operator/traffic/proxy/haproxy"
)

// Options are the agent's flags.
type Options struct {
	// Namespace holds both ConfigMaps; PodName is this pod's name, the agent's key in
	// the status ConfigMap.
	Namespace, PodName string
	// SplitConfigMap is the desired ConfigMap, StatusConfigMap the reports'.
	SplitConfigMap, StatusConfigMap string
	// Dir is the emptyDir shared with HAProxy: haproxy.cfg, pin.acl, haproxy.sock.
	Dir string
	// Bind is HAProxy's listener, HealthAddr the agent's probes.
	Bind, HealthAddr string
	// DrainTimeout bounds HAProxy's soft stop (hard-stop-after).
	DrainTimeout time.Duration
	// ReportInterval is the least time between two reports that only say a draining
	// cohort's requests in flight changed, and how often HAProxy is read while one
	// drains.
	ReportInterval time.Duration
	// Resync is how often HAProxy is read back when nothing drains (an HAProxy that
	// restarted is seen by then).
	Resync time.Duration
	// Log is the agent's logger.
	Log logr.Logger
}

// Flags registers the agent's flags on fs.
func Flags(fs *flag.FlagSet, o *Options) {
	fs.StringVar(&o.Namespace, "namespace", "", "namespace of the split and status ConfigMaps")
	fs.StringVar(&o.PodName, "pod-name", "", "this pod's name: the key of its report in the status ConfigMap")
	fs.StringVar(&o.SplitConfigMap, "split-configmap", "", "name of the ConfigMap holding the desired split")
	fs.StringVar(&o.StatusConfigMap, "status-configmap", "", "name of the ConfigMap the agents report into")
	fs.StringVar(&o.Dir, "dir", "/run/dgd-proxy", "directory shared with HAProxy: its configuration, pin ACL and runtime API socket")
	fs.StringVar(&o.Bind, "bind-address", ":8000", "address HAProxy listens on for clients")
	fs.StringVar(&o.HealthAddr, "health-probe-bind-address", ":8081", "address of /healthz, /readyz and /startz")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", time.Hour, "longest soft stop of HAProxy (hard-stop-after)")
	fs.DurationVar(&o.ReportInterval, "report-interval", time.Second, "least time between two reports of a drain's requests in flight")
	fs.DurationVar(&o.Resync, "resync", 10*time.Second, "how often HAProxy is read back when nothing drains")
}

func (o Options) validate() error {
	for flagName, v := range map[string]string{"namespace": o.Namespace, "pod-name": o.PodName,
		"split-configmap": o.SplitConfigMap, "status-configmap": o.StatusConfigMap, "dir": o.Dir} {
		if v == "" {
			return fmt.Errorf("--%s is required", flagName)
		}
	}
	if o.ReportInterval <= 0 || o.Resync <= 0 {
		return errors.New("--report-interval and --resync must be positive")
	}
	return nil
}

// Main runs `manager proxy-agent [flags]` until SIGTERM: 0 then, 1 on an error.
func Main(args []string) int {
	fs := flag.NewFlagSet("proxy-agent", flag.ExitOnError)
	var o Options
	Flags(fs, &o)
	zo := zap.Options{}
	zo.BindFlags(fs)
	_ = fs.Parse(args) // ExitOnError
	o.Log = zap.New(zap.UseFlagOptions(&zo)).WithName("proxy-agent")
	cfg, err := ctrl.GetConfig()
	if err == nil {
		err = Run(ctrl.SetupSignalHandler(), cfg, o)
	}
	if err != nil {
		o.Log.Error(err, "proxy-agent")
		return 1
	}
	return 0
}

// Run runs the agent until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client for the API server: %w", err)
	}
	h := &health{stale: 6 * max(o.Resync, o.ReportInterval)}
	ln, err := net.Listen("tcp", o.HealthAddr)
	if err != nil {
		return fmt.Errorf("probes on %s: %w", o.HealthAddr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	desired := watchSplit(ctx, cs, o)
	rep := newReporter(cs, o)
	go rep.run(ctx)
	a := &agent{o: o, hap: haproxy.Client{Socket: haproxy.Socket(o.Dir)}, health: h, reporter: rep}
	a.run(ctx, desired)
	return nil
}

// writeFile replaces path's content in one rename, so that HAProxy, starting at any
// moment, reads a whole file.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", tmp, path, err)
	}
	return nil
}
