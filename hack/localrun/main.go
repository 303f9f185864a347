// Command localrun is `make run`. With KUBECONFIG set it installs the CRDs into that
// cluster and runs the operator against it. Otherwise it starts a local API server
// (etcd + kube-apiserver built from pinned modules into bin/), installs the CRDs, writes
// an admin kubeconfig to .local/kubeconfig, runs the operator in-process, applies a
// sample DGD and prints how to use it. Ctrl-C stops everything it started.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/cmd/manager/app"
)

func main() {
	assets := flag.String("assets", "bin", "directory with etcd and kube-apiserver")
	crds := flag.String("crds", "config/crd/bases", "directory of CRD manifests to install")
	sample := flag.String("sample", "config/samples/disagg.yaml", "DGD manifest to apply to a local API server")
	flag.Parse()
	ctrl.SetLogger(zap.New())
	if err := run(*assets, *crds, *sample); err != nil {
		fmt.Fprintln(os.Stderr, "localrun:", err)
		os.Exit(1)
	}
}

func run(assets, crds, sample string) error {
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
		fmt.Printf("Running the operator against KUBECONFIG=%s (Ctrl-C stops it).\n", os.Getenv("KUBECONFIG"))
		return runOperator(ctx, cfg)
	}
	abs, err := filepath.Abs(assets)
	if err != nil {
		return err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: abs, CRDDirectoryPaths: []string{crds}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting the local API server: %w", err)
	}
	defer func() { _ = env.Stop() }()
	kubeconfig, err := writeKubeconfig(env)
	if err != nil {
		return err
	}
	if err := applyFile(ctx, cfg, sample); err != nil {
		return err
	}
	printUsage(kubeconfig, sample)
	return runOperator(ctx, cfg)
}

func writeKubeconfig(env *envtest.Environment) (string, error) {
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	raw, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path, _ := filepath.Abs(".local/kubeconfig")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, raw, 0o600)
}

// applyFile creates every object of a multi-document YAML file (namespace "default").
func applyFile(ctx context.Context, cfg *rest.Config, path string) error {
	c, err := client.New(cfg, client.Options{Scheme: app.NewScheme()})
	if err != nil {
		return err
	}
	objs, err := readObjects(path)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if o.GetNamespace() == "" {
			o.SetNamespace("default")
		}
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

func readObjects(path string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, doc := range splitYAML(raw) {
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out, nil
}

func splitYAML(raw []byte) [][]byte {
	var docs [][]byte
	start := 0
	for i := 0; i+4 <= len(raw); i++ {
		if (i == 0 || raw[i-1] == '\n') && string(raw[i:i+3]) == "---" && (i+3 == len(raw) || raw[i+3] == '\n') {
			docs = append(docs, raw[start:i])
			start = i + 3
		}
	}
	return append(docs, raw[start:])
}

func runOperator(ctx context.Context, cfg *rest.Config) error {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  app.NewScheme(),
		Cache:   app.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return err
	}
	if err := app.Setup(mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

func printUsage(kubeconfig, sample string) {
	fmt.Printf(`
Local API server is up; the operator is running and %s is applied.

  export KUBECONFIG=%s
  kubectl get dgd,deploy,controllerrevisions
  kubectl get dgd vllm-disagg -o yaml          # status, conditions, revisions

Trigger a rollout (tensor parallelism 2 on decode, a new worker revision):
  kubectl apply -f config/samples/disagg-tp2.yaml
Or patch the image of every worker:
  kubectl patch dgd vllm-disagg --type=json -p '[{"op":"replace","path":"/spec/services/VllmDecodeWorker/extraPodSpec/mainContainer/image","value":"nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.5.0"}]'

This local control plane has no kube-controller-manager, so Deployments get no pods
and the rollout waits for readiness (kubectl patch the Deployment status to play it).
Stop with Ctrl-C.
`, sample, kubeconfig)
}
