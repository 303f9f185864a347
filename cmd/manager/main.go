// Command manager runs the DynamoGraphDeployment rollout operator.
package main

import (
	"context"
	"flag"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/traffic"
	"github.com/dgd-rollout/operator/traffic/proxy/agent"
)

func main() {
	// manager apply-crds: the Helm chart's init container (app.ApplyCRDs).
	if len(os.Args) > 1 && os.Args[1] == "apply-crds" {
		os.Exit(applyCRDs(os.Args[2:]))
	}
	// manager proxy-agent: the sidecar beside HAProxy in a traffic proxy pod (agent.Main).
	if len(os.Args) > 1 && os.Args[1] == "proxy-agent" {
		os.Exit(agent.Main(os.Args[2:]))
	}
	var (
		metricsAddr, probeAddr, leaseNS string
		leaderElect                     bool
		lease, renew, retry             time.Duration
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz probes")
	flag.BoolVar(&leaderElect, "leader-elect", true, "elect a leader so that only one replica acts")
	flag.StringVar(&leaseNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's own)")
	flag.DurationVar(&lease, "leader-elect-lease-duration", 15*time.Second, "how long followers wait before taking over a lease that is not renewed")
	flag.DurationVar(&renew, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew before giving up")
	flag.DurationVar(&retry, "leader-elect-retry-period", 2*time.Second, "how often candidates try to acquire or renew")
	var platform render.Config
	app.PlatformFlags(flag.CommandLine, &platform)
	var tuning app.Tuning
	app.TuningFlags(flag.CommandLine, &tuning)
	var prometheusURL string
	app.AnalysisFlags(flag.CommandLine, &prometheusURL)
	var prometheus analysis.PrometheusClient
	app.PrometheusClientFlags(flag.CommandLine, &prometheus)
	var watch []string
	app.WatchNamespacesFlag(flag.CommandLine, &watch)
	var webhook app.WebhookOptions
	app.WebhookFlags(flag.CommandLine, &webhook)
	var trafficCfg traffic.Config
	app.TrafficFlags(flag.CommandLine, &trafficCfg)
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	ctrl.Log.Info("garbage collector", "gcPercent", tuning.ApplyGC())

	le := leaderElection{enabled: leaderElect, namespace: leaseNS, lease: lease, renew: renew, retry: retry}
	if err := run(metricsAddr, probeAddr, le, app.Options{Platform: platform, Tuning: tuning,
		PrometheusURL: prometheusURL, Prometheus: prometheus, Webhook: webhook, WatchNamespaces: watch, Traffic: trafficCfg}); err != nil {
		ctrl.Log.Error(err, "manager exited")
		os.Exit(1)
	}
}

// leaderElection holds the leader election flags.
type leaderElection struct {
	enabled             bool
	namespace           string
	lease, renew, retry time.Duration
}

func run(metricsAddr, probeAddr string, le leaderElection, o app.Options) error {
	mgr, err := app.NewManager(ctrl.GetConfigOrDie(), app.Options{Manager: ctrl.Options{
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          le.enabled,
		LeaderElectionID:        "dgd-rollout.nvidia.com",
		LeaderElectionNamespace: le.namespace,
		LeaseDuration:           &le.lease,
		RenewDeadline:           &le.renew,
		RetryPeriod:             &le.retry,
		// main exits as soon as Start returns, so the Lease can be released on SIGTERM
		// and a follower takes over at once instead of after the lease duration.
		LeaderElectionReleaseOnCancel: true,
	}, Platform: o.Platform, Tuning: o.Tuning, PrometheusURL: o.PrometheusURL, Prometheus: o.Prometheus,
		Webhook: o.Webhook, WatchNamespaces: o.WatchNamespaces, Traffic: o.Traffic})
	if err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting manager", "leaderElection", le.enabled)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// applyCRDs runs `manager apply-crds [flags]`: the CRDs this binary embeds applied
// server-side (app.ApplyCRDs), then exit 0; 1 on an error.
func applyCRDs(args []string) int {
	fs := flag.NewFlagSet("apply-crds", flag.ExitOnError)
	var o app.CRDApplyOptions
	app.CRDApplyFlags(fs, &o)
	opts := zap.Options{}
	opts.BindFlags(fs)
	_ = fs.Parse(args) // ExitOnError
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	cfg, err := ctrl.GetConfig()
	if err == nil {
		ctx, cancel := context.WithTimeout(ctrl.SetupSignalHandler(), 3*time.Minute)
		defer cancel()
		err = app.ApplyCRDs(ctx, cfg, o)
	}
	if err != nil {
		ctrl.Log.Error(err, "apply-crds")
		return 1
	}
	return 0
}
