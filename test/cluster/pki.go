package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// serviceIP is the first address of serviceCIDR: the `kubernetes` Service's ClusterIP.
const (
	serviceCIDR = "10.96.0.0/16"
	serviceIP   = "10.96.0.1"
)

// pki is the cluster's throw-away certificate authority and the files made from it.
// Every key is ECDSA P-256: generating one takes well under a millisecond, where
// RSA-2048 takes tens, and every component accepts it (service-account tokens are
// then ES256).
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey

	caFile, servingCert, servingKey, saKey, saPub string
}

// clientUsers are the client certificates newPKI issues: file name, CN, O.
var clientUsers = [][3]string{
	{"admin", "admin", "system:masters"},
	{"kube-controller-manager", "system:kube-controller-manager", ""},
	{"kube-scheduler", "system:kube-scheduler", ""},
}

// newPKI writes into dir the CA, the serving certificate (shared by kube-apiserver,
// kube-controller-manager and kube-scheduler, all on 127.0.0.1), the
// service-account key pair and the clientUsers' certificates.
func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir, caFile: filepath.Join(dir, "ca.crt")}
	var err error
	if p.caKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, err
	}
	tmpl := certTemplate(pkix.Name{CommonName: "local-cluster-ca"})
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.caKey.PublicKey, p.caKey)
	if err != nil {
		return nil, err
	}
	if p.caCert, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	if err := writePEM(p.caFile, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	if err := writeKey(filepath.Join(dir, "ca.key"), p.caKey); err != nil {
		return nil, err
	}
	if p.servingCert, p.servingKey, err = p.issue("serving", servingTemplate()); err != nil {
		return nil, err
	}
	for _, u := range clientUsers {
		if err := p.clientCert(u[0], u[1], u[2]); err != nil {
			return nil, err
		}
	}
	return p, p.writeSAKeys()
}

// clientFiles are the certificate and key files of a clientUsers entry.
func (p *pki) clientFiles(name string) (certFile, keyFile string) {
	return filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
}

// writeSAKeys writes the service-account signing key and its public half.
func (p *pki) writeSAKeys() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	p.saKey, p.saPub = filepath.Join(p.dir, "sa.key"), filepath.Join(p.dir, "sa.pub")
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := writeKey(p.saKey, key); err != nil {
		return err
	}
	return writePEM(p.saPub, "PUBLIC KEY", pub)
}

// clientCert issues <name>.crt/.key, a client certificate for user cn in group org
// (none if empty).
func (p *pki) clientCert(name, cn, org string) error {
	subject := pkix.Name{CommonName: cn}
	if org != "" {
		subject.Organization = []string{org}
	}
	tmpl := certTemplate(subject)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	_, _, err := p.issue(name, tmpl)
	return err
}

// issue signs tmpl with the CA and writes <name>.crt and <name>.key.
func (p *pki) issue(name string, tmpl *x509.Certificate) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	return certFile, keyFile, writeKey(keyFile, key)
}

// servingTemplate is a server certificate for every name the API server is reached by
// here (127.0.0.1, localhost) and the in-cluster names of the kubernetes Service.
func servingTemplate() *x509.Certificate {
	t := certTemplate(pkix.Name{CommonName: "kube-apiserver"})
	t.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	t.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	t.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback, net.ParseIP(serviceIP)}
	t.DNSNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local"}
	return t
}

// certTemplate is a template valid from an hour ago for a year, with a random serial.
func certTemplate(subject pkix.Name) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
	}
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// writeKubeconfig writes a self-contained kubeconfig (certificates embedded) for
// the client certificate certFile/keyFile against server.
func (p *pki) writeKubeconfig(path, server, certFile, keyFile string) error {
	ca, err := os.ReadFile(p.caFile)
	if err != nil {
		return err
	}
	cert, err := os.ReadFile(certFile)
	if err != nil {
		return err
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "user"}
	cfg.CurrentContext = "local"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}
