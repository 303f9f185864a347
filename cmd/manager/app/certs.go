package app

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The self-signed certificate's Secret (--webhook-secret-name, default
// dgd-rollout-webhook-cert) lives in the operator's own namespace ("system" in
// config/rbac, renamed by kustomize like the rest): a Role there grants get and update
// of that one Secret by name, and create (which Kubernetes cannot narrow by name) in
// that namespace only. No cluster-wide Secret permission comes from it (issue 23).
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,resourceNames=dgd-rollout-webhook-cert,verbs=get;update
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=create
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

// injectCRD points the CRD's conversion at the webhook (Service or URL) with caBundle,
// retrying on a conflict: a CRD just created or applied is still written by the API
// server's own controllers (its status conditions), and a manager that gave up here
// would exit and wait out a CrashLoopBackOff.
func (m *certManager) injectCRD(ctx context.Context, caBundle []byte) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error { return m.injectCRDOnce(ctx, caBundle) })
}

func (m *certManager) injectCRDOnce(ctx context.Context, caBundle []byte) error {
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
		return fmt.Errorf("pointing CRD %s's conversion at the webhook: %w", CRDName, err) // %w: RetryOnConflict sees a conflict
	}
	return nil
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
		if old, _, _ := parsePair(data["ca.crt"], nil, now); old != nil && old.NotAfter.After(now) {
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
