package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/gateway"
	"github.com/dgd-rollout/operator/test/lws"
	"github.com/dgd-rollout/operator/test/opproc"
	"github.com/dgd-rollout/operator/test/prom"
	"github.com/dgd-rollout/operator/test/proxypod"
)

// PodReadyDelay is KWOK's Running→Ready delay in this suite: rollouts take real time.
const PodReadyDelay = time.Second

var (
	cl  *cluster.Cluster
	k8s client.Client
	ctx = context.Background()
	nsN int
	// opConfig is the operator's client config; stopOp stops the operator running.
	opConfig *rest.Config
	stopOp   func()
	// opWebhook is the conversion webhook every operator of the suite serves (/convert
	// on 127.0.0.1, registered by URL with a throw-away CA).
	opWebhook app.WebhookOptions
	// promSrv is the real Prometheus the operator's analysis steps query; it scrapes
	// exporter, which serves Dynamo's worker metrics for every Ready worker pod.
	promSrv  *prom.Server
	exporter *prom.Exporter
	// lwsRunner runs the LWS controllers and webhooks (a spec may stop and restart it).
	lwsRunner *lws.Runner
	// proxyRunner runs the containers of every traffic proxy pod the cluster schedules
	// (test/proxypod: the agent from the manager binary built from this tree, Debian's
	// HAProxy), which KWOK would not.
	proxyRunner *proxypod.Runner
)

func TestEndToEnd(t *testing.T) {
	if _, err := os.Stat(filepath.Join(cluster.RepoRoot(), "bin", "kube-controller-manager")); err != nil {
		t.Skip("bin/kube-controller-manager is missing: run make cluster-bins")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "End to end on the local control plane")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.Level(zapErrorsOnly)))
	// The proxy pods' agent is this tree's manager binary, built while the cluster starts.
	binDir := GinkgoT().TempDir()
	built := make(chan error, 1)
	var manager string
	go func() {
		var err error
		manager, err = opproc.Build(cluster.RepoRoot(), binDir)
		built <- err
	}()
	haproxy, err := exec.LookPath("haproxy")
	Expect(err).NotTo(HaveOccurred(), "Debian's haproxy runs the traffic proxy's pods (make test installs it)")
	cl, err = cluster.Start(ctx, cluster.Options{Nodes: 4, GPUsPerNode: 8, PodReadyDelay: PodReadyDelay})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(cl.Stop()).To(Succeed()) })
	GinkgoWriter.Printf("local control plane up in %s\n", cl.StartupDuration)
	// The Gateway API's standard CRDs (the module's, as go.mod pins it), before the
	// operator starts: it registers the gatewayAPI provider only where HTTPRoutes are
	// served (app.Providers).
	gatewayCRDs, err := gateway.CRDDir()
	Expect(err).NotTo(HaveOccurred())
	Expect(cl.InstallCRDs(ctx, append([]string{filepath.Join(cluster.RepoRoot(), "config", "crd", "bases"), gatewayCRDs}, lws.CRDPaths()...)...)).To(Succeed())
	Expect(cluster.InstallMissingCRDs(ctx, cl.Config, filepath.Join(cluster.RepoRoot(), "config", "crd", "dynamo"))).To(Succeed())
	k8s, err = client.New(cl.Config, client.Options{Scheme: app.NewScheme()})
	Expect(err).NotTo(HaveOccurred())
	lwsRunner, err = lws.Start(ctx, lws.Options{Config: cl.Config, DisaggregatedSet: true})
	Expect(err).NotTo(HaveOccurred(), "the real LeaderWorkerSet controllers and webhooks")
	DeferCleanup(func() { Expect(lwsRunner.Stop()).To(Succeed()) })
	exporter, err = prom.StartExporter(k8s, prom.Demo)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(exporter.Close)
	promSrv, err = prom.Start(ctx, prom.Options{Targets: []string{exporter.Addr}, Log: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred(), "prometheus on PATH (make cluster-bins installs Debian's)")
	DeferCleanup(promSrv.Close)
	Expect(<-built).To(Succeed(), "building the manager binary the proxy pods' agent runs")
	proxyRunner, err = proxypod.Run(ctx, proxypod.RunnerOptions{Config: cl.Config, Manager: manager, HAProxy: haproxy})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(proxyRunner.Stop)
	startOperator()
})

// startOperator runs the operator in this process, wired exactly as cmd/manager and
// with the permissions it ships with: as the ServiceAccount config/rbac binds to its
// ClusterRole (config/rbac applied as is, in its namespace "system"), so a rule missing
// from the RBAC markers fails this suite (an admin kubeconfig would hide it), including
// the Roles it creates for Dynamo's pods, which Kubernetes lets it grant only if it holds
// their permissions itself.
//
// The operator serves the CRD's conversion webhook (/convert) on 127.0.0.1, registered
// by URL with a throw-away CA, as make run does: every v1alpha1 request of this suite is
// converted by it (the operator itself reads and writes v1beta1).
func startOperator() {
	opConfig = operatorConfig()
	var err error
	opWebhook, err = app.LocalWebhook(GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	stopOp = runOperator(nil)
	DeferCleanup(func() { stopOp() })
}

// runOperator starts an operator (its client made by newClient when set: a broken
// operator for a mutation test), serving the CRD's /convert, and returns the function
// that stops it.
func runOperator(newClient client.NewClientFunc) func() {
	mgr, err := app.NewManager(opConfig, app.Options{Manager: ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		// Mutation tests run other operators in this process, one at a time.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		NewClient:  newClient,
	}, PrometheusURL: promSrv.URL, Webhook: opWebhook})
	Expect(err).NotTo(HaveOccurred())
	opCtx, cancel := context.WithCancel(ctx)
	done, exited := make(chan error, 1), make(chan error, 1)
	go func() { err := mgr.Start(opCtx); exited <- err; done <- err }()
	Expect(app.WaitConversion(ctx, cl.Config, exited)).To(Succeed(), "the API server converting through the operator's /convert")
	return func() {
		cancel()
		Expect(<-done).To(Succeed())
	}
}

// withBrokenOperator replaces the suite's operator with one whose client newClient
// makes, until the spec ends (a mutation test: the suite's checks must catch it).
func withBrokenOperator(newClient client.NewClientFunc) {
	stopOp()
	stopOp = runOperator(newClient)
	DeferCleanup(func() {
		stopOp()
		stopOp = runOperator(nil)
	})
}

// operatorConfig applies config/rbac and returns a client config that acts as its
// ServiceAccount (impersonated by the admin: the API server authorizes every request
// as that ServiceAccount and its groups).
func operatorConfig() *rest.Config {
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "system"}})).To(Succeed())
	for _, f := range []string{"service_account.yaml", "role.yaml", "role_binding.yaml", "leader_election_role.yaml"} {
		objs, err := cluster.ReadObjects(filepath.Join(cluster.RepoRoot(), "config", "rbac", f))
		Expect(err).NotTo(HaveOccurred())
		for _, o := range objs {
			Expect(k8s.Create(ctx, o)).To(Succeed(), "%s %s", f, o.GetName())
		}
	}
	cfg := rest.CopyConfig(cl.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:system:controller-manager",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:system", "system:authenticated"}}
	return cfg
}

func newNamespace() string {
	nsN++
	ns := fmt.Sprintf("e2e-%d", nsN)
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	return ns
}
