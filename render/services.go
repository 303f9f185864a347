package render

import (
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// ServiceName is the Service of a component: `<dgd>-<service>` (Dynamo's
// NormalizeKubeResourceName: lower case, dots to dashes), and `-<hash>` for a worker
// revision. name caps it as workload names are capped.
func ServiceName(dgd, service, hash string, name func(dgd, service, hash string) string) string {
	return name(strings.ReplaceAll(dgd, ".", "-"), strings.ReplaceAll(service, ".", "-"), hash)
}

// WantsService reports whether a component gets a Service: a frontend always, any
// other component under Kubernetes discovery (its EndpointSlices are how its pods are
// found).
func (c Component) WantsService() bool {
	return c.kind() == kindFrontend || c.Config.KubernetesDiscovery(c.DGD)
}

// Service renders the component's ClusterIP Service named name (GenerateComponentService),
// headless for a worker revision (below: this operator's deliberate difference):
// port http 8000 for a frontend, system 9090 for anything else, the discovery labels
// under Kubernetes discovery (its EndpointSlices inherit them). It selects the
// service's pods of every revision for a stable service (a frontend's Service outlives
// its workloads), of its revision only for a worker, and only gang leaders when
// leadersOnly (LeaderWorkerSet).
func (c Component) Service(name string, leadersOnly bool) *corev1.Service {
	labels := map[string]string{
		v1alpha1.LabelGraph: c.DGD.Name, v1alpha1.LabelService: labelValue(c.Name), v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
	}
	selector := map[string]string{v1alpha1.LabelGraph: c.DGD.Name, v1alpha1.LabelService: labelValue(c.Name)}
	if c.Spec.ComponentType != "" {
		labels[v1alpha1.LabelComponentType] = labelValue(c.Spec.ComponentType)
		selector[v1alpha1.LabelComponentType] = labelValue(c.Spec.ComponentType)
	}
	if c.Hash != "" {
		labels[v1alpha1.LabelWorkerHash] = c.Hash
		selector[v1alpha1.LabelWorkerHash] = c.Hash
	}
	if leadersOnly {
		selector[LabelRole] = string(RoleLeader)
	}
	if c.Config.KubernetesDiscovery(c.DGD) {
		labels[LabelDiscoveryBackend] = DiscoveryKubernetes
		labels[LabelDiscoveryEnabled] = discoveryEnabledValue
	}
	p := corev1.ServicePort{Name: PortNameSystem, Port: PortSystem, TargetPort: intstr.FromString(PortNameSystem), Protocol: corev1.ProtocolTCP}
	if c.kind() == kindFrontend {
		p = corev1.ServicePort{Name: PortNameHTTP, Port: PortHTTP, TargetPort: intstr.FromString(PortNameHTTP), Protocol: corev1.ProtocolTCP}
	}
	spec := corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: selector, Ports: []corev1.ServicePort{p}}
	if c.Hash != "" && !c.Cohort() {
		// A worker revision's Service is headless: its name changes with every revision,
		// so no client can address it, and Dynamo's discovery reads only its
		// EndpointSlices. A virtual IP would cost an address of the Service range, an
		// IPAddress object and kube-proxy rules on every node per revision, and the
		// API server's allocator scans every allocated address on each create (a tenth
		// of its CPU in benchmark P3 at 500 graphs). A cohort's frontend Service keeps
		// its virtual IP: the traffic provider sends the cohort's share of requests to
		// it (the proxy by that address).
		spec.ClusterIP = corev1.ClusterIPNone
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.DGD.Namespace, Labels: labels},
		Spec:       spec,
	}
}

// IngressHost is `[hostPrefix]host.<hostSuffix>`, the suffix the operator's default
// when the spec gives none.
func (c Component) IngressHost() string {
	in := c.Spec.Ingress
	host := ptr.Deref(in.HostPrefix, "") + in.Host
	return host + "." + ptr.Deref(in.HostSuffix, c.Config.hostSuffix())
}

// Ingress renders services.<name>.ingress, or nil when it is not enabled
// (GenerateComponentIngress): one rule, path / (Prefix) to the component's Service on
// port 8000, the class and TLS Secret from the spec, its labels and annotations.
func (c Component) Ingress(name, serviceName string) *networkingv1.Ingress {
	in := c.Spec.Ingress
	if in == nil || !in.Enabled {
		return nil
	}
	host := c.IngressHost()
	labels := maps.Clone(in.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1alpha1.LabelGraph], labels[v1alpha1.LabelService], labels[v1alpha1.LabelManagedBy] = c.DGD.Name, labelValue(c.Name), v1alpha1.ManagedByValue
	ing := &networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.DGD.Namespace, Labels: labels, Annotations: maps.Clone(in.Annotations)},
		Spec: networkingv1.IngressSpec{
			IngressClassName: in.IngressControllerClassName,
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: serviceName, Port: networkingv1.ServiceBackendPort{Number: PortHTTP}}}}}}}}},
		},
	}
	if in.TLS != nil && in.TLS.SecretName != "" {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{host}, SecretName: in.TLS.SecretName}}
	}
	return ing
}
