package analysis

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// PrometheusClient is how a Prometheus is reached on a real cluster: over TLS with the
// cluster's or a private CA, and with a bearer token (an OpenShift or kube-rbac-proxy
// fronted Prometheus, a managed Prometheus behind a gateway). The zero value is plain
// HTTP without credentials. The operator (cmd/manager) and kubectl dgd analysis run
// bind it to the same flags, whose names its errors use: --prometheus-bearer-token-file,
// --prometheus-ca-file, --prometheus-insecure-skip-verify.
type PrometheusClient struct {
	// BearerTokenFile is read at every request (a projected ServiceAccount token
	// rotates), and sent as "Authorization: Bearer <token>".
	BearerTokenFile string
	// CAFile holds the PEM certificates that verify the server (instead of the system's
	// roots); read once at start.
	CAFile string
	// InsecureSkipVerify skips verifying the server's certificate (testing only).
	InsecureSkipVerify bool
}

// Flag usages of PrometheusClient's fields, shared by the binaries that bind them.
const (
	UsageBearerTokenFile    = "file whose content is sent as a bearer token with every Prometheus query (re-read each time), e.g. /var/run/secrets/kubernetes.io/serviceaccount/token"
	UsageCAFile             = "PEM CA certificates that verify an https --prometheus-url (default: the system's roots)"
	UsageInsecureSkipVerify = "do not verify the certificate of an https --prometheus-url (testing only)"
)

// Transport is the HTTP transport of p: nil (Go's default) for the zero value.
func (p PrometheusClient) Transport() (http.RoundTripper, error) {
	if p == (PrometheusClient{}) {
		return nil, nil
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: p.InsecureSkipVerify} //nolint:gosec // the flag says so
	if p.CAFile != "" {
		pem, err := os.ReadFile(p.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--prometheus-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--prometheus-ca-file %s: no PEM certificate in it", p.CAFile)
		}
		t.TLSClientConfig.RootCAs = pool
	}
	if p.BearerTokenFile == "" {
		return t, nil
	}
	if _, err := readToken(p.BearerTokenFile); err != nil {
		return nil, err // a wrong path fails at start, not at the first analysis
	}
	return &bearerFile{next: t, file: p.BearerTokenFile}, nil
}

// bearerFile adds the token of file to every request.
type bearerFile struct {
	next http.RoundTripper
	file string
}

func (b *bearerFile) RoundTrip(r *http.Request) (*http.Response, error) {
	token, err := readToken(b.file)
	if err != nil {
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	return b.next.RoundTrip(r)
}

func readToken(file string) (string, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--prometheus-bearer-token-file: %w", err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return "", errors.New("--prometheus-bearer-token-file " + file + " is empty")
	}
	return token, nil
}
