// Command localrun is `make run`. With KUBECONFIG set it installs the CRDs into that
// cluster and runs the operator against it. Otherwise it starts the local control plane
// (test/cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK
// GPU nodes, built from pinned modules into bin/), installs our CRD and LeaderWorkerSet's,
// runs the LWS controllers and the operator in-process, applies a sample DGD, writes the
// admin kubeconfig to .local/kubeconfig and prints how to use it. Ctrl-C stops
// everything it started.
package main

import (
	"context"
	"flag"
	"fmt"
	corev1 "k8s.io/api/core/v1"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/grove"
	"github.com/dgd-rollout/operator/test/lws"
	"github.com/dgd-rollout/operator/test/prom"
)

var (
	// platform is the Dynamo platform pods are rendered for. The local control plane has
	// none: Kubernetes discovery (the default) needs no NATS or etcd, so none is set.
	platform      render.Config
	dynamoCRDs    string
	prometheusURL string
)

func main() {
	assets := flag.String("assets", "bin", "directory with etcd and kube-apiserver")
	crds := flag.String("crds", "config/crd/bases", "directory of CRD manifests to install")
	sample := flag.String("sample", "config/samples/disagg.yaml", "DGD manifest to apply to the local control plane")
	delay := flag.Duration("pod-ready-delay", 2*time.Second, "how long a KWOK pod takes from Running to Ready")
	flag.StringVar(&prometheusURL, "prometheus-url", "", "with KUBECONFIG set: the Prometheus the analysis steps query (see cmd/manager)")
	flag.StringVar(&dynamoCRDs, "dynamo-crds", "config/crd/dynamo", "directory of Dynamo's platform CRDs (DynamoWorkerMetadata), installed when absent")
	app.PlatformFlags(flag.CommandLine, &platform)
	flag.Parse()
	ctrl.SetLogger(zap.New())
	if err := run(*assets, *crds, *sample, *delay); err != nil {
		fmt.Fprintln(os.Stderr, "localrun:", err)
		os.Exit(1)
	}
}

func run(assets, crds, sample string, delay time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv("KUBECONFIG") != "" {
		cfg, err := ctrl.GetConfig()
		if err != nil {
			return err
		}
		if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{crds}}); err != nil {
			return fmt.Errorf("installing CRDs: %w", err)
		}
		if err := cluster.InstallMissingCRDs(ctx, cfg, dynamoCRDs); err != nil {
			return err
		}
		fmt.Printf("Running the operator against KUBECONFIG=%s (Ctrl-C stops it).\n", os.Getenv("KUBECONFIG"))
		fmt.Println("It serves no conversion webhook from here (the cluster's API server cannot reach this process):")
		fmt.Println("v1beta1 DynamoGraphDeployments work; v1alpha1 ones need the operator deployed in the cluster (config/default).")
		return runOperator(ctx, cfg, prometheusURL, app.WebhookOptions{})
	}
	abs, err := filepath.Abs(assets)
	if err != nil {
		return err
	}
	fmt.Println("Starting the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK)...")
	cl, err := cluster.Start(ctx, cluster.Options{BinDir: abs, PodReadyDelay: delay})
	if err != nil {
		return fmt.Errorf("starting the local control plane: %w", err)
	}
	defer func() { _ = cl.Stop() }()
	groveCRDs, err := grove.CRDDir()
	if err != nil {
		return err
	}
	if err := cl.InstallCRDs(ctx, append([]string{crds, groveCRDs}, lws.CRDPaths()...)...); err != nil {
		return err
	}
	if err := cluster.InstallMissingCRDs(ctx, cl.Config, dynamoCRDs); err != nil {
		return err
	}
	runner, err := lws.Start(ctx, lws.Options{Config: cl.Config})
	if err != nil {
		return fmt.Errorf("starting the LeaderWorkerSet controllers: %w", err)
	}
	defer func() { _ = runner.Stop() }()
	kubeconfig, err := copyKubeconfig(cl.Kubeconfig)
	if err != nil {
		return err
	}
	promURL, closeProm, err := startPrometheus(ctx, cl.Config)
	if err != nil {
		return err
	}
	defer closeProm()
	// The operator serves the CRD's conversion webhook (/convert) on 127.0.0.1,
	// registered by URL with a throw-away CA: v1alpha1 and v1beta1 both work.
	certs, err := os.MkdirTemp("", "dgd-convert-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(certs) }()
	webhook, err := app.LocalWebhook(certs)
	if err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- runOperator(ctx, cl.Config, promURL, webhook) }()
	if err := app.WaitConversion(ctx, cl.Config, exited); err != nil {
		return err
	}
	if err := applyFile(ctx, cl.Config, sample); err != nil {
		return err
	}
	printUsage(kubeconfig, sample, cl, delay, promURL)
	return <-exited
}

// startPrometheus runs a real Prometheus (the prometheus on PATH) scraping an exporter of the
// metrics Dynamo's workers would serve for the local control plane's Ready worker pods
// (test/prom): an image whose tag ends in "-errors" fails 30% of its requests and has a
// slow time to first token, every other image is healthy. The operator's analysis
// steps query it.
func startPrometheus(ctx context.Context, cfg *rest.Config) (string, func(), error) {
	c, err := client.New(cfg, client.Options{Scheme: app.NewScheme()})
	if err != nil {
		return "", nil, err
	}
	exp, err := prom.StartExporter(c, prom.Demo)
	if err != nil {
		return "", nil, err
	}
	srv, err := prom.Start(ctx, prom.Options{Targets: []string{exp.Addr}})
	if err != nil {
		_ = exp.Close()
		return "", nil, fmt.Errorf("starting Prometheus (make run installs Debian's prometheus when it is missing from PATH): %w", err)
	}
	return srv.URL, func() { _ = srv.Close(); _ = exp.Close() }, nil
}

// copyKubeconfig puts the cluster's admin kubeconfig where the README says.
func copyKubeconfig(from string) (string, error) {
	raw, err := os.ReadFile(from)
	if err != nil {
		return "", err
	}
	path, _ := filepath.Abs(".local/kubeconfig")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, raw, 0o600)
}

// applyFile creates every object of a multi-document YAML file (namespace "default")
// as kubectl apply would: with the last-applied-configuration annotation, so that a
// later kubectl apply of the same objects merges cleanly instead of warning.
func applyFile(ctx context.Context, cfg *rest.Config, path string) error {
	c, err := client.New(cfg, client.Options{Scheme: app.NewScheme()})
	if err != nil {
		return err
	}
	objs, err := cluster.ReadObjects(path)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if o.GetNamespace() == "" {
			o.SetNamespace("default")
		}
		applied, err := o.MarshalJSON()
		if err != nil {
			return err
		}
		ann := o.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[corev1.LastAppliedConfigAnnotation] = string(applied) + "\n"
		o.SetAnnotations(ann)
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

func runOperator(ctx context.Context, cfg *rest.Config, promURL string, webhook app.WebhookOptions) error {
	mgr, err := app.NewManager(cfg, app.Options{Manager: ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: "127.0.0.1:8080"}, // docs/day2.md scrapes it
	}, Platform: platform, PrometheusURL: promURL, Webhook: webhook})
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

func printUsage(kubeconfig, sample string, cl *cluster.Cluster, delay time.Duration, promURL string) {
	fmt.Printf(`
The local control plane is up (%s, %d KWOK nodes with nvidia.com/gpu: 8 each); the
LeaderWorkerSet controllers and the operator are running; the LWS and Grove CRDs are
installed; %s is applied.

  export KUBECONFIG=%s
  kubectl get dgd,deploy,pods,controllerrevisions
  kubectl get dgd vllm-disagg -o yaml          # status, conditions, revisions

Trigger a rollout (tensor parallelism 2 on decode, a new worker revision) and watch it:
  kubectl apply -f config/samples/disagg-tp2.yaml
  kubectl get dgd vllm-disagg -w
Or set the image of both workers (make install-plugin puts kubectl dgd on PATH):
  kubectl dgd set image vllm-disagg VllmDecodeWorker=nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.5.0 VllmPrefillWorker=nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.5.0

Multinode gangs on the real LeaderWorkerSet controllers:
  kubectl apply -f config/samples/disagg-multinode.yaml
A Grove-backed graph (PodCliqueSets are created; no pods appear: the Grove operator
itself is not part of this control plane):
  kubectl apply -f config/samples/disagg-grove.yaml

Canary analysis (spec.rollout.steps[].analysis, docs/analysis.md) queries a real
Prometheus at %s, which scrapes Dynamo's worker metrics for every Ready worker pod:
an image whose tag ends in "-errors" fails 30%% of its requests, any other is healthy.
  curl -s %s/api/v1/query --data-urlencode 'query=sum by (dynamo_namespace) (dynamo_component_requests_total)'

KWOK simulates the pods (no container runs): each becomes Ready %s after it starts.
Stop everything with Ctrl-C.
`, cl.StartupDuration.Round(time.Millisecond), len(cl.NodeNames()), sample, kubeconfig, promURL, promURL, delay)
}
