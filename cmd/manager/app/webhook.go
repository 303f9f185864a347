package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	crconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/dgd-rollout/operator/api/conversion"
	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/freeport"
)

// CRDName is the DynamoGraphDeployment CRD, whose spec.conversion the operator points at
// its /convert.
const CRDName = "dynamographdeployments.nvidia.com"

// Certificate modes of the conversion webhook (--webhook-cert-mode).
const (
	// CertSelfSigned: the operator makes a CA and a serving certificate, keeps them in
	// the Secret --webhook-secret-name (tls.crt, tls.key, ca.crt), writes them into
	// --webhook-cert-dir, injects the CA into the CRD's conversion config and renews
	// both before they expire. The default.
	CertSelfSigned = "self-signed"
	// CertManager: cert-manager writes the serving certificate into --webhook-cert-dir
	// (a Certificate's Secret mounted there) and its CA injector fills the CRD's
	// caBundle (annotation cert-manager.io/inject-ca-from on the CRD). The operator only
	// points the CRD's conversion at its Service.
	CertManager = "cert-manager"
	// CertFiles: the certificate is in --webhook-cert-dir (tls.crt, tls.key) and the
	// operator injects ca.crt from there into the CRD (how make run and the test suites
	// run it, on 127.0.0.1 with --webhook-url).
	CertFiles = "files"
)

// Lifetimes of the self-signed certificates, and how long before expiry they are
// renewed.
const (
	caLifetime      = 10 * 365 * 24 * time.Hour
	servingLifetime = 365 * 24 * time.Hour
	renewBefore     = 90 * 24 * time.Hour
	recheckEvery    = time.Hour
)

// WebhookOptions configure the conversion webhook the manager serves at /convert. Issue
// 25's install (Helm chart) sets these flags; see WebhookFlags.
type WebhookOptions struct {
	// BindAddress is host:port of the webhook server; "0" or "" serves none (the CRD's
	// conversion must then be served by another process).
	BindAddress string
	// CertDir holds tls.crt, tls.key and ca.crt.
	CertDir string
	// CertMode is CertSelfSigned, CertManager or CertFiles.
	CertMode string
	// SecretName is the Secret of CertSelfSigned, in ServiceNamespace.
	SecretName string
	// ServiceName and ServiceNamespace are the Service in front of the webhook server
	// (the serving certificate's names, and the CRD's clientConfig.service); the
	// namespace defaults to $POD_NAMESPACE.
	ServiceName, ServiceNamespace string
	// ServicePort is the Service's port (clientConfig.service.port).
	ServicePort int32
	// URL, when set, registers the conversion by URL instead of the Service
	// (https://127.0.0.1:<port> for a local control plane); CertFiles then.
	URL string
}

// DefaultWebhookOptions are the flags' defaults: the ones config/manager deploys.
func DefaultWebhookOptions() WebhookOptions {
	return WebhookOptions{BindAddress: ":9443", CertDir: filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs"),
		CertMode: CertSelfSigned, SecretName: "dgd-rollout-webhook-cert", ServiceName: "dgd-rollout-webhook-service",
		ServiceNamespace: os.Getenv("POD_NAMESPACE"), ServicePort: 443}
}

// WebhookFlags binds the conversion webhook's flags.
func WebhookFlags(fs *flag.FlagSet, o *WebhookOptions) {
	*o = DefaultWebhookOptions()
	fs.StringVar(&o.BindAddress, "webhook-bind-address", o.BindAddress, "host:port of the conversion webhook server (/convert); 0 serves none")
	fs.StringVar(&o.CertDir, "webhook-cert-dir", o.CertDir, "directory of the webhook's tls.crt, tls.key and ca.crt")
	fs.StringVar(&o.CertMode, "webhook-cert-mode", o.CertMode, "who makes the webhook's certificate: self-signed (the operator, kept in --webhook-secret-name, CA injected into the CRD, renewed before expiry), cert-manager (mounted into --webhook-cert-dir; cert-manager's CA injector fills the CRD's caBundle) or files (in --webhook-cert-dir; the operator injects its ca.crt)")
	fs.StringVar(&o.SecretName, "webhook-secret-name", o.SecretName, "Secret holding the self-signed CA and serving certificate")
	fs.StringVar(&o.ServiceName, "webhook-service-name", o.ServiceName, "Service in front of the webhook server (certificate names and the CRD's conversion clientConfig)")
	fs.StringVar(&o.ServiceNamespace, "webhook-service-namespace", o.ServiceNamespace, "namespace of that Service and of the Secret (default $POD_NAMESPACE)")
	fs.StringVar(&o.URL, "webhook-url", o.URL, "register the CRD's conversion webhook by this URL instead of the Service (local runs: https://127.0.0.1:9443)")
}

// enabled reports whether the manager serves /convert.
func (o WebhookOptions) enabled() bool { return o.BindAddress != "" && o.BindAddress != "0" }

// Server is the webhook server of o.
func (o WebhookOptions) Server() (webhook.Server, error) {
	host, port, err := net.SplitHostPort(o.BindAddress)
	if err != nil {
		return nil, fmt.Errorf("--webhook-bind-address %q: %w", o.BindAddress, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("--webhook-bind-address %q: %w", o.BindAddress, err)
	}
	return webhook.NewServer(webhook.Options{Host: host, Port: p, CertDir: o.CertDir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			// No HTTP/2 (CVE-2023-44487 / -39325), as controller-runtime's scaffolding;
			// the API server speaks HTTP/1.1 to a webhook behind a Service anyway
			// (k8s.io/apiserver pkg/util/webhook/client.go, issue.k8s.io/75791).
			c.NextProtos = []string{"http/1.1"}
			// Called once per TLS handshake: the connections the API server opens.
			c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
				WebhookHandshakes.Inc()
				return nil, nil
			}
		}}}), nil
}

// WebhookHandshakes counts the TLS handshakes of the webhook server, served on the
// manager's metrics endpoint as dgd_rollout_webhook_tls_handshakes_total: beside
// controller_runtime_webhook_requests_total it tells how many requests reuse a
// connection (the API server keeps at most 25 idle connections per webhook host,
// k8s.io/client-go transport/cache.go).
var WebhookHandshakes = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "dgd_rollout_webhook_tls_handshakes_total",
	Help: "TLS handshakes of the conversion webhook server (connections opened by the API server).",
})

func init() { ctrlmetrics.Registry.MustRegister(WebhookHandshakes) }

// SetupConversion registers /convert on mgr's webhook server and makes sure the
// certificate exists and the CRD's conversion points at the server, before the
// manager starts (the server needs its certificate to start).
func SetupConversion(cfg *rest.Config, mgr ctrl.Manager, o WebhookOptions) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &v1beta1.DynamoGraphDeployment{}).WithConverter(conversion.Converter()).Complete(); err != nil {
		return fmt.Errorf("registering /convert: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	cm := &certManager{c: c, o: o}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cm.ensure(ctx, time.Now()); err != nil {
		return err
	}
	return mgr.Add(cm)
}

// ConversionConfig is the CRD's spec.conversion for a webhook of o with caBundle.
func ConversionConfig(o WebhookOptions, caBundle []byte) *apiextensionsv1.CustomResourceConversion {
	cc := &apiextensionsv1.WebhookClientConfig{CABundle: caBundle}
	if o.URL != "" {
		u := o.URL + "/convert"
		cc.URL = &u
	} else {
		path, port := "/convert", o.ServicePort
		cc.Service = &apiextensionsv1.ServiceReference{Name: o.ServiceName, Namespace: o.ServiceNamespace, Path: &path, Port: &port}
	}
	return &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ClientConfig: cc, ConversionReviewVersions: []string{"v1"}}}
}

func equalConversion(a, b *apiextensionsv1.CustomResourceConversion) bool {
	if a == nil || b == nil || a.Strategy != b.Strategy || a.Webhook == nil || b.Webhook == nil ||
		a.Webhook.ClientConfig == nil || b.Webhook.ClientConfig == nil {
		return a == b
	}
	x, y := a.Webhook.ClientConfig, b.Webhook.ClientConfig
	return bytes.Equal(x.CABundle, y.CABundle) && fmt.Sprint(deref(x.URL)) == fmt.Sprint(deref(y.URL)) &&
		fmt.Sprintf("%+v", derefSvc(x.Service)) == fmt.Sprintf("%+v", derefSvc(y.Service))
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func derefSvc(s *apiextensionsv1.ServiceReference) string {
	if s == nil {
		return ""
	}
	return fmt.Sprintf("%s/%s%s:%d", s.Namespace, s.Name, deref(s.Path), ptrVal(s.Port))
}

func ptrVal(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// LocalWebhook prepares a conversion webhook for a local control plane: a throw-away CA
// and a serving certificate for 127.0.0.1 in dir, a free port on 127.0.0.1, and the
// options that serve it there and register the CRD's conversion by that URL (make run
// and the test suites).
func LocalWebhook(dir string) (WebhookOptions, error) {
	now := time.Now()
	ca, caKey, caPEM, _, err := newCA(now)
	if err != nil {
		return WebhookOptions{}, err
	}
	crt, key, err := newServing(ca, caKey, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, now)
	if err != nil {
		return WebhookOptions{}, err
	}
	if err := writeCertFiles(dir, map[string][]byte{"ca.crt": caPEM, "tls.crt": crt, "tls.key": key}); err != nil {
		return WebhookOptions{}, err
	}
	port, err := freeport.Pick() // the server binds it later (freeport: not from the ephemeral range)
	if err != nil {
		return WebhookOptions{}, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	return WebhookOptions{BindAddress: addr, CertDir: dir, CertMode: CertFiles, URL: "https://" + addr}, nil
}

// CABundle reads the ca.crt of o's CertDir.
func (o WebhookOptions) CABundle() ([]byte, error) {
	return os.ReadFile(filepath.Join(o.CertDir, "ca.crt"))
}

// ServeConversion serves /convert alone (no controller) as o says and points the CRD's
// conversion at it, until ctx ends: for a process that must keep conversion up while
// the operator comes and goes (the crash suite kills it), or that runs no operator.
// It returns once the API server converts through it.
func ServeConversion(ctx context.Context, cfg *rest.Config, o WebhookOptions) error {
	srv, err := o.Server()
	if err != nil {
		return err
	}
	scheme := NewScheme()
	conv, err := conversion.Converter()(scheme)
	if err != nil {
		return err
	}
	reg := crconversion.NewRegistry()
	if err := reg.RegisterConverter(v1beta1.GroupVersion.WithKind("DynamoGraphDeployment").GroupKind(), conv); err != nil {
		return err
	}
	srv.Register("/convert", crconversion.NewWebhookHandler(scheme, reg))
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := (&certManager{c: c, o: o}).ensure(ctx, time.Now()); err != nil {
		return err
	}
	return WaitConversion(ctx, cfg, done)
}

// WaitConversion waits until the API server converts DynamoGraphDeployments through the
// CRD's webhook: a server-side dry-run create of a v1alpha1 DGD (stored as v1beta1)
// succeeds. exited, when it yields, is the webhook server's end.
func WaitConversion(ctx context.Context, cfg *rest.Config, exited <-chan error) error {
	c, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		return err
	}
	c = client.NewDryRunClient(c)
	probe := func() error {
		d := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "conversion-probe"}}
		err := c.Create(ctx, d)
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		err := probe()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the API server to convert through /convert: %w (last: %v)", ctx.Err(), err)
		case e := <-exited:
			return fmt.Errorf("conversion webhook server exited: %v", e)
		case <-t.C:
		}
	}
}

// LocalConversion is ServeConversion on 127.0.0.1 with a throw-away CA (removed when ctx
// ends): for suites that run the operator binary, which they may kill.
func LocalConversion(ctx context.Context, cfg *rest.Config) error {
	dir, err := os.MkdirTemp("", "dgd-convert-")
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); _ = os.RemoveAll(dir) }()
	o, err := LocalWebhook(dir)
	if err != nil {
		return err
	}
	return ServeConversion(ctx, cfg, o)
}
