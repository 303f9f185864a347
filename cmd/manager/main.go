// Command manager runs the DynamoGraphDeployment rollout operator.
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/dgd-rollout/operator/cmd/manager/app"
)

func main() {
	var (
		metricsAddr, probeAddr, leaseNS string
		leaderElect                     bool
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz probes")
	flag.BoolVar(&leaderElect, "leader-elect", true, "elect a leader so that only one replica acts")
	flag.StringVar(&leaseNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's own)")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

	if err := run(metricsAddr, probeAddr, leaseNS, leaderElect); err != nil {
		ctrl.Log.Error(err, "manager exited")
		os.Exit(1)
	}
}

func run(metricsAddr, probeAddr, leaseNS string, leaderElect bool) error {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  app.NewScheme(),
		Cache:                   app.CacheOptions(),
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "dgd-rollout.nvidia.com",
		LeaderElectionNamespace: leaseNS,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := app.Setup(mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting manager", "leaderElection", leaderElect)
	return mgr.Start(ctrl.SetupSignalHandler())
}
