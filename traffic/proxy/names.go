package proxy

import (
	"path"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/traffic"
)

// LabelProxy marks the proxy's pods (value "true"): the entry Service selects it, and
// no frontend pod carries it, so EntrySelector never selects a frontend.
const LabelProxy = v1alpha1.LabelTrafficProxy

// Defaults of spec.rollout.trafficRouting.proxy.
const (
	// DefaultImage is HAProxy's image when neither the DGD nor the operator names one:
	// the Docker library's 2.6 (built with PCRE2, which the header route's regular
	// expression needs, and STOPSIGNAL SIGUSR1, HAProxy's soft stop: docker-library/haproxy
	// 2.6/Dockerfile).
	DefaultImage = "docker.io/library/haproxy:2.6"
	// DefaultAgentImage is the agent's image where the operator cannot read its own
	// (it runs in no pod): config/manager's image name.
	DefaultAgentImage = "dgd-rollout:latest"
	// DefaultReplicas is the proxy Deployment's replicas.
	DefaultReplicas int32 = 2
	// DefaultDrainTimeoutSeconds is drainTimeoutSeconds' default (the API's).
	DefaultDrainTimeoutSeconds int32 = 3600
)

// The pod's layout: ports, and the files in the emptyDir both containers mount at
// RunDir.
const (
	// HTTPPort is HAProxy's listener, named PortName, which the entry Service targets.
	HTTPPort int32 = 8000
	// PortName is the name of HTTPPort.
	PortName = "http"
	// HealthPort serves the agent's /healthz, /readyz and /startz.
	HealthPort int32 = 8081
	// RunDir is the emptyDir of the socket, the configuration and the pin ACL.
	RunDir = "/run/dgd-proxy"
	// ConfigFile is HAProxy's configuration, written by the agent.
	ConfigFile = "haproxy.cfg"
	// SocketFile is HAProxy's runtime API (a UNIX socket, level admin).
	SocketFile = "haproxy.sock"
	// PinFile holds the header route's pattern (an ACL file, one pattern per line).
	PinFile = "pin.acl"
)

// Name is the name of the proxy's Deployment, ServiceAccount, Role, RoleBinding and
// desired ConfigMap: `{entry}-proxy`.
func Name(t traffic.Traffic) string { return t.Entry + "-proxy" }

// StatusName is the name of the agents' status ConfigMap: `{entry}-proxy-status`.
func StatusName(t traffic.Traffic) string { return t.Entry + "-proxy-status" }

// ConfigPath is where HAProxy reads its configuration under dir.
func ConfigPath(dir string) string { return path.Join(dir, ConfigFile) }

// labels are the labels of every proxy object.
func labels(t traffic.Traffic) map[string]string {
	return map[string]string{
		v1alpha1.LabelGraph:     t.DGD.Name,
		v1alpha1.LabelService:   t.Frontend,
		v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
		LabelProxy:              "true",
	}
}

// podLabels select the proxy's pods (the Deployment's selector, immutable once
// created, so it never changes with the image or the replicas).
func podLabels(t traffic.Traffic) map[string]string {
	return map[string]string{
		v1alpha1.LabelGraph:   t.DGD.Name,
		v1alpha1.LabelService: t.Frontend,
		LabelProxy:            "true",
	}
}
