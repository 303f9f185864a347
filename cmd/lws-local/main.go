// Command lws-local runs the real LeaderWorkerSet v0.9.0 controllers and webhooks
// next to a local control plane (test/cluster, `make run`), like an LWS
// installation would, but in this process: it installs the LWS CRDs (unless
// --install-crds=false), serves LWS's webhooks on https://127.0.0.1:<free port>
// with a throw-away CA and registers them by URL in the webhook configurations
// dgd-e2e-lws-mutating / dgd-e2e-lws-validating. On SIGINT or SIGTERM it stops
// and deletes those configurations (they use failurePolicy Fail); leftovers of a
// killed run are deleted at start, or with --cleanup.
//
//	lws-local --kubeconfig /tmp/cluster-x/admin.kubeconfig
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/dgd-rollout/operator/test/lws"
)

func main() {
	// --kubeconfig is registered by controller-runtime (default: $KUBECONFIG,
	// then ~/.kube/config).
	var (
		certDir     string
		installCRDs bool
		cleanup     bool
	)
	flag.StringVar(&certDir, "cert-dir", "", "directory for the webhook CA and serving certificate (default: a temporary directory)")
	flag.BoolVar(&installCRDs, "install-crds", true, "create or update the LWS CRDs from the module cache first")
	flag.BoolVar(&cleanup, "cleanup", false, "only delete leftover webhook configurations of a killed run, then exit")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	log := zap.New(zap.UseFlagOptions(&opts))
	ctrl.SetLogger(log)

	if err := run(certDir, installCRDs, cleanup); err != nil {
		fmt.Fprintln(os.Stderr, "lws-local:", err)
		os.Exit(1)
	}
}

func run(certDir string, installCRDs, cleanup bool) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if cleanup {
		return lws.CleanupStaleWebhooks(ctx, cfg)
	}
	startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if installCRDs {
		if err := lws.InstallCRDs(startCtx, cfg); err != nil {
			return fmt.Errorf("installing LWS CRDs: %w", err)
		}
	}
	r, err := lws.Start(startCtx, lws.Options{Config: cfg, CertDir: certDir, Log: ctrl.Log.WithName("lws")})
	if err != nil {
		return err
	}
	fmt.Printf("lws-local: LeaderWorkerSet controllers and webhooks ready at %s (startup %s)\n",
		r.URL, r.StartupDuration.Round(time.Millisecond))

	select {
	case <-ctx.Done():
		stop() // a second signal kills the process
		ctrl.Log.Info("signal received: stopping and deleting the webhook configurations")
	case <-r.Done():
	}
	return errors.Join(r.Err(), r.Stop())
}
