package app

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	crconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/dgd-rollout/operator/api/conversion"
	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
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

// server is the webhook server of o.
func (o WebhookOptions) server() (webhook.Server, error) {
	host, port, err := net.SplitHostPort(o.BindAddress)
	if err != nil {
		return nil, fmt.Errorf("--webhook-bind-address %q: %w", o.BindAddress, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("--webhook-bind-address %q: %w", o.BindAddress, err)
	}
	return webhook.NewServer(webhook.Options{Host: host, Port: p, CertDir: o.CertDir,
		// No HTTP/2 (CVE-2023-44487 / -39325), as controller-runtime's scaffolding.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}}), nil
}

// setupConversion registers /convert on mgr's webhook server and makes sure the
// certificate exists and the CRD's conversion points at the server, before the
// manager starts (the server needs its certificate to start).
func setupConversion(cfg *rest.Config, mgr ctrl.Manager, o WebhookOptions) error {
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

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;update
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,resourceNames=dynamographdeployments.nvidia.com,verbs=get;update

// certManager keeps the webhook's certificate and the CRD's conversion config right.
// Every replica runs it (it writes its own CertDir); the Secret is the one source, and
// a replica that loses a write race reads the winner's.
type certManager struct {
	c client.Client
	o WebhookOptions
}

// NeedLeaderElection is false: every replica serves /convert.
func (m *certManager) NeedLeaderElection() bool { return false }

// Start re-checks every hour: renewal before expiry, a Secret or CRD someone changed.
func (m *certManager) Start(ctx context.Context) error {
	t := time.NewTicker(recheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			if err := m.ensure(ctx, now); err != nil {
				ctrl.Log.Error(err, "conversion webhook certificate")
			}
		}
	}
}

// ensure makes the certificate current and the CRD's conversion point at it.
func (m *certManager) ensure(ctx context.Context, now time.Time) error {
	var caBundle []byte
	switch m.o.CertMode {
	case CertSelfSigned:
		if m.o.URL != "" {
			return errors.New("--webhook-url needs --webhook-cert-mode=files")
		}
		b, err := m.ensureSecret(ctx, now)
		if err != nil {
			return err
		}
		caBundle = b
	case CertFiles:
		b, err := os.ReadFile(filepath.Join(m.o.CertDir, "ca.crt"))
		if err != nil {
			return fmt.Errorf("--webhook-cert-mode=files: %w", err)
		}
		caBundle = b
	case CertManager:
	default:
		return fmt.Errorf("--webhook-cert-mode %q: want %s, %s or %s", m.o.CertMode, CertSelfSigned, CertManager, CertFiles)
	}
	return m.injectCRD(ctx, caBundle)
}

// ensureSecret reads (or makes, or renews) the Secret, writes its files into CertDir and
// returns the caBundle.
func (m *certManager) ensureSecret(ctx context.Context, now time.Time) ([]byte, error) {
	if m.o.ServiceNamespace == "" {
		return nil, errors.New("--webhook-cert-mode=self-signed needs --webhook-service-namespace (or $POD_NAMESPACE)")
	}
	key := client.ObjectKey{Namespace: m.o.ServiceNamespace, Name: m.o.SecretName}
	for attempt := 0; ; attempt++ {
		var s corev1.Secret
		err := m.c.Get(ctx, key, &s)
		exists := err == nil
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		data, renewed, err := renew(s.Data, DNSNames(m.o.ServiceName, m.o.ServiceNamespace), now)
		if err != nil {
			return nil, err
		}
		if renewed {
			s.Data, s.Type = data, corev1.SecretTypeTLS
			s.Namespace, s.Name = key.Namespace, key.Name
			if exists {
				err = m.c.Update(ctx, &s)
			} else {
				err = m.c.Create(ctx, &s)
			}
			if (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) && attempt < 5 {
				continue // another replica wrote it: use theirs
			}
			if err != nil {
				return nil, fmt.Errorf("writing Secret %s: %w", key, err)
			}
		}
		if err := writeCertFiles(m.o.CertDir, data); err != nil {
			return nil, err
		}
		return data["ca.crt"], nil
	}
}

// injectCRD points the CRD's conversion at the webhook (Service or URL) with caBundle.
func (m *certManager) injectCRD(ctx context.Context, caBundle []byte) error {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := m.c.Get(ctx, client.ObjectKey{Name: CRDName}, &crd); err != nil {
		return fmt.Errorf("reading CRD %s: %w", CRDName, err)
	}
	want := ConversionConfig(m.o, caBundle)
	if m.o.CertMode == CertManager && crd.Spec.Conversion != nil && crd.Spec.Conversion.Webhook != nil && crd.Spec.Conversion.Webhook.ClientConfig != nil {
		want.Webhook.ClientConfig.CABundle = crd.Spec.Conversion.Webhook.ClientConfig.CABundle // cert-manager's
	}
	if equalConversion(crd.Spec.Conversion, want) {
		return nil
	}
	crd.Spec.Conversion = want
	if err := m.c.Update(ctx, &crd); err != nil {
		return fmt.Errorf("pointing CRD %s's conversion at the webhook: %w", CRDName, err)
	}
	return nil
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

// DNSNames are the serving certificate's names for a Service.
func DNSNames(service, namespace string) []string {
	return []string{service, service + "." + namespace, service + "." + namespace + ".svc", service + "." + namespace + ".svc.cluster.local"}
}

// renew returns data (tls.crt, tls.key, ca.crt, ca.key) with a CA valid for at least
// renewBefore and a serving certificate for names signed by it, valid for at least
// renewBefore: the given ones when they are, new ones otherwise (renewed true). When the
// CA is renewed, ca.crt keeps the old CA too while it is valid, so a replica still
// serving the old certificate is trusted until it reloads.
func renew(data map[string][]byte, names []string, now time.Time) (map[string][]byte, bool, error) {
	ca, caKey, caOK := parsePair(data["ca.crt"], data["ca.key"], now)
	serving, _, servingOK := parsePair(data["tls.crt"], data["tls.key"], now)
	if caOK && servingOK && serving.CheckSignatureFrom(ca) == nil && sameNames(serving.DNSNames, names) {
		return data, false, nil
	}
	out := map[string][]byte{}
	bundle := []byte(nil)
	if !caOK {
		var err error
		var caPEM, keyPEM []byte
		if ca, caKey, caPEM, keyPEM, err = newCA(now); err != nil {
			return nil, false, err
		}
		if old, _, ok := parsePair(data["ca.crt"], nil, now); ok && old.NotAfter.After(now) {
			bundle = append(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: old.Raw})...)
		}
		out["ca.key"] = keyPEM
		bundle = append(caPEM, bundle...)
	} else {
		out["ca.key"] = data["ca.key"]
		bundle = data["ca.crt"]
	}
	crt, key, err := newServing(ca, caKey, names, nil, now)
	if err != nil {
		return nil, false, err
	}
	out["ca.crt"], out["tls.crt"], out["tls.key"] = bundle, crt, key
	return out, true, nil
}

// parsePair parses the first certificate of crtPEM (and keyPEM when given), and reports
// whether it is valid for at least renewBefore more.
func parsePair(crtPEM, keyPEM []byte, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, bool) {
	b, _ := pem.Decode(crtPEM)
	if b == nil {
		return nil, nil, false
	}
	crt, err := x509.ParseCertificate(b.Bytes)
	if err != nil || now.Add(renewBefore).After(crt.NotAfter) || now.Before(crt.NotBefore) {
		return crt, nil, false
	}
	if keyPEM == nil {
		return crt, nil, true
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return crt, nil, false
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return crt, nil, false
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(crt.PublicKey) {
		return crt, nil, false
	}
	return crt, key, true
}

func sameNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func newCA(now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, []byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "dgd-rollout-webhook-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(caLifetime),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	crt, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return crt, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

func newServing(ca *x509.Certificate, caKey *ecdsa.PrivateKey, names []string, ips []net.IP, now time.Time) (crtPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	cn := "127.0.0.1"
	if len(names) > 0 {
		cn = names[0]
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(servingLifetime), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, DNSNames: names, IPAddresses: ips}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

// writeCertFiles writes tls.crt, tls.key and ca.crt into dir when they differ (the
// webhook server's certificate watcher reloads them).
func writeCertFiles(dir string, data map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, name := range []string{"ca.crt", "tls.key", "tls.crt"} {
		path := filepath.Join(dir, name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data[name]) {
			continue
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, data[name], 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
	}
	return nil
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
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return WebhookOptions{}, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
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
	srv, err := o.server()
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

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions/status,resourceNames=dynamographdeployments.nvidia.com,verbs=get;update

// MigrateStorage rewrites every DynamoGraphDeployment stored in an older version (a
// cluster that ran Dynamo's operator or this one before v1beta1) in v1beta1, and then
// narrows the CRD's status.storedVersions to [v1beta1], as Dynamo's in-operator
// migrator does: a later CRD may then drop v1alpha1. Each object is read and written
// back unchanged as v1beta1 (the API server stores it in the storage version). The
// operator runs it once at start, as the leader; it does nothing when storedVersions
// is already [v1beta1].
func MigrateStorage(ctx context.Context, cfg *rest.Config) error {
	c, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: CRDName}, &crd); err != nil {
		return fmt.Errorf("reading CRD %s: %w", CRDName, err)
	}
	stored := crd.Status.StoredVersions
	if len(stored) == 1 && stored[0] == v1beta1.GroupVersion.Version {
		return nil
	}
	var list v1beta1.DynamoGraphDeploymentList
	for {
		if err := c.List(ctx, &list, client.Continue(list.Continue), client.Limit(100)); err != nil {
			return fmt.Errorf("listing DynamoGraphDeployments: %w", err)
		}
		for i := range list.Items {
			if err := rewrite(ctx, c, &list.Items[i]); err != nil {
				return err
			}
		}
		if list.Continue == "" {
			break
		}
	}
	for attempt := 0; ; attempt++ {
		if err := c.Get(ctx, client.ObjectKey{Name: CRDName}, &crd); err != nil {
			return err
		}
		crd.Status.StoredVersions = []string{v1beta1.GroupVersion.Version}
		err := c.Status().Update(ctx, &crd)
		if apierrors.IsConflict(err) && attempt < 5 {
			continue
		}
		if err != nil {
			return fmt.Errorf("narrowing the storedVersions of CRD %s: %w", CRDName, err)
		}
		ctrl.Log.Info("storage migrated to v1beta1", "crd", CRDName, "was", stored)
		return nil
	}
}

// rewrite writes d back unchanged (re-read on a conflict; gone is done).
func rewrite(ctx context.Context, c client.Client, d *v1beta1.DynamoGraphDeployment) error {
	for attempt := 0; ; attempt++ {
		err := c.Update(ctx, d)
		if apierrors.IsNotFound(err) || err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt >= 5 {
			return fmt.Errorf("rewriting DynamoGraphDeployment %s/%s in v1beta1: %w", d.Namespace, d.Name, err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
}

// migrator runs MigrateStorage once as the leader, retrying until it succeeds.
type migrator struct{ cfg *rest.Config }

func (m migrator) Start(ctx context.Context) error {
	for {
		err := MigrateStorage(ctx, m.cfg)
		if err == nil {
			return nil
		}
		ctrl.Log.Error(err, "storage migration to v1beta1 (retrying in a minute)")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Minute):
		}
	}
}
