package app

import (
	"context"
	"flag"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/traffic"
	"github.com/dgd-rollout/operator/traffic/proxy"
)

// TrafficFlags binds the flags of the traffic providers between cohorts.
func TrafficFlags(fs *flag.FlagSet, cfg *traffic.Config) {
	fs.StringVar(&cfg.ProxyImage, "proxy-image", proxy.DefaultImage, "HAProxy image of the traffic proxy between cohorts, where spec.rollout.trafficRouting.proxy.image names none")
	fs.StringVar(&cfg.AgentImage, "proxy-agent-image", "", "image of the traffic proxy's agent: this operator's own image (default: read from this pod, POD_NAMESPACE and POD_NAME)")
}

// trafficConfig is cfg with the proxy's defaults filled in: HAProxy's image, and the
// agent's, this operator's own (ownImage), or proxy.DefaultAgentImage where it runs in
// no pod (make run, tests), said in the log.
func trafficConfig(mgr ctrl.Manager, cfg traffic.Config) traffic.Config {
	if cfg.ProxyImage == "" {
		cfg.ProxyImage = proxy.DefaultImage
	}
	if cfg.AgentImage != "" {
		return cfg
	}
	img, err := ownImage(context.Background(), mgr.GetAPIReader())
	switch {
	case err != nil:
		ctrl.Log.Error(err, "the traffic proxy's agent image: using the default", "image", proxy.DefaultAgentImage)
	case img == "":
		ctrl.Log.Info("not running in a pod: the traffic proxy's agent image is the default (--proxy-agent-image sets it)", "image", proxy.DefaultAgentImage)
	}
	cfg.AgentImage = cmpOr(img, proxy.DefaultAgentImage)
	return cfg
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ownImage is the image of the container this operator runs in, read from its own pod
// (the downward API gives POD_NAMESPACE and POD_NAME; config/manager and the Helm chart
// set them): the proxy's agent is a subcommand of this binary (manager proxy-agent), so
// it runs the image the operator runs. Its container is the one whose args start the
// manager (not apply-crds); "" when not running in a pod.
func ownImage(ctx context.Context, r client.Reader) (string, error) {
	ns, name := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")
	if ns == "" || name == "" {
		return "", nil
	}
	var pod corev1.Pod
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
		return "", fmt.Errorf("reading this operator's pod %s/%s for its image: %w", ns, name, err)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == ManagerContainer {
			return c.Image, nil
		}
	}
	if len(pod.Spec.Containers) == 1 {
		return pod.Spec.Containers[0].Image, nil
	}
	return "", fmt.Errorf("this operator's pod %s/%s has no container %q", ns, name, ManagerContainer)
}

// ManagerContainer is the name of the operator's container in its pod (config/manager,
// the Helm chart).
const ManagerContainer = "manager"
