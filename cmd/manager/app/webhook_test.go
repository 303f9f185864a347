package app

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func certOf(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(pemBytes)
	if b == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSelfSignedCertificates plays the self-signed mode on a real cluster's objects (a
// fake client): the first start makes the Secret, writes the files and points the CRD's
// conversion at the Service with the CA; a restart keeps them; 90 days before the
// serving certificate expires it is renewed by the same CA; near the CA's own expiry a
// new CA is made and the CRD trusts both until the old one expires.
func TestSelfSignedCertificates(t *testing.T) {
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: CRDName}}
	c := fake.NewClientBuilder().WithScheme(NewScheme()).WithObjects(crd).Build()
	o := DefaultWebhookOptions()
	o.ServiceNamespace, o.CertDir = "dgd-rollout-system", t.TempDir()
	m := &certManager{c: c, o: o}
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)

	state := func() (corev1.Secret, apiextensionsv1.CustomResourceDefinition) {
		t.Helper()
		var s corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: o.ServiceNamespace, Name: o.SecretName}, &s); err != nil {
			t.Fatal(err)
		}
		var got apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: CRDName}, &got); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
			b, err := os.ReadFile(filepath.Join(o.CertDir, f))
			if err != nil || !bytes.Equal(b, s.Data[f]) {
				t.Fatalf("%s in the cert dir is not the Secret's (%v)", f, err)
			}
		}
		return s, got
	}

	if err := m.ensure(ctx, now); err != nil {
		t.Fatal(err)
	}
	s1, crd1 := state()
	cc := crd1.Spec.Conversion.Webhook.ClientConfig
	if crd1.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter || cc.Service == nil || cc.Service.Name != o.ServiceName ||
		cc.Service.Namespace != o.ServiceNamespace || *cc.Service.Path != "/convert" || !bytes.Equal(cc.CABundle, s1.Data["ca.crt"]) {
		t.Fatalf("CRD conversion %+v", crd1.Spec.Conversion)
	}
	serving, ca := certOf(t, s1.Data["tls.crt"]), certOf(t, s1.Data["ca.crt"])
	if err := serving.CheckSignatureFrom(ca); err != nil {
		t.Fatal(err)
	}
	if want := "dgd-rollout-webhook-service.dgd-rollout-system.svc"; !bytes.Contains([]byte(serving.DNSNames[2]), []byte(want)) {
		t.Errorf("DNS names %v, want %s among them", serving.DNSNames, want)
	}

	// A restart a month later: nothing changes.
	if err := m.ensure(ctx, now.Add(30*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if s2, _ := state(); !bytes.Equal(s2.Data["tls.crt"], s1.Data["tls.crt"]) {
		t.Error("a valid certificate was replaced")
	}

	// 80 days before the serving certificate expires: renewed, same CA.
	later := serving.NotAfter.Add(-80 * 24 * time.Hour)
	if err := m.ensure(ctx, later); err != nil {
		t.Fatal(err)
	}
	s3, crd3 := state()
	renewed := certOf(t, s3.Data["tls.crt"])
	if renewed.SerialNumber.Cmp(serving.SerialNumber) == 0 || renewed.CheckSignatureFrom(ca) != nil || !renewed.NotAfter.After(serving.NotAfter) {
		t.Errorf("serving certificate not renewed by the same CA: %v -> %v", serving.NotAfter, renewed.NotAfter)
	}
	if !bytes.Equal(crd3.Spec.Conversion.Webhook.ClientConfig.CABundle, s1.Data["ca.crt"]) {
		t.Error("the caBundle changed without a new CA")
	}

	// 80 days before the CA expires: a new CA, the bundle trusts both.
	if err := m.ensure(ctx, ca.NotAfter.Add(-80*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	s4, crd4 := state()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(crd4.Spec.Conversion.Webhook.ClientConfig.CABundle) {
		t.Fatal("caBundle is no PEM")
	}
	newCA := certOf(t, s4.Data["ca.crt"])
	if newCA.SerialNumber.Cmp(ca.SerialNumber) == 0 {
		t.Fatal("CA not renewed")
	}
	if !bytes.Contains(crd4.Spec.Conversion.Webhook.ClientConfig.CABundle, s1.Data["ca.crt"][:64]) {
		t.Error("the new bundle dropped the old CA while it is valid")
	}
	if certOf(t, s4.Data["tls.crt"]).CheckSignatureFrom(newCA) != nil {
		t.Error("the serving certificate is not signed by the new CA")
	}
}

// TestURLConversion is the mode of make run and the suites: files and a URL.
func TestURLConversion(t *testing.T) {
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: CRDName}}
	c := fake.NewClientBuilder().WithScheme(NewScheme()).WithObjects(crd).Build()
	o, err := LocalWebhook(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := (&certManager{c: c, o: o}).ensure(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	var got apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: CRDName}, &got); err != nil {
		t.Fatal(err)
	}
	ca, _ := o.CABundle()
	cc := got.Spec.Conversion.Webhook.ClientConfig
	if cc.URL == nil || *cc.URL != o.URL+"/convert" || cc.Service != nil || !bytes.Equal(cc.CABundle, ca) {
		t.Errorf("conversion %+v", cc)
	}
}
