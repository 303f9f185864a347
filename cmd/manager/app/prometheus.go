package app

import (
	"flag"

	"github.com/dgd-rollout/operator/controllers/analysis"
)

// PrometheusClientFlags binds the flags of the analysis steps' Prometheus client
// (analysis.PrometheusClient: TLS and a bearer token; kubectl dgd analysis run binds
// the same names).
func PrometheusClientFlags(fs *flag.FlagSet, p *analysis.PrometheusClient) {
	fs.StringVar(&p.BearerTokenFile, "prometheus-bearer-token-file", "", analysis.UsageBearerTokenFile)
	fs.StringVar(&p.CAFile, "prometheus-ca-file", "", analysis.UsageCAFile)
	fs.BoolVar(&p.InsecureSkipVerify, "prometheus-insecure-skip-verify", false, analysis.UsageInsecureSkipVerify)
}
