package proxy

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/digest"
	"github.com/dgd-rollout/operator/traffic"
)

// Provider is the proxy traffic provider. Its zero value is ready to use.
type Provider struct{}

var _ traffic.Provider = Provider{}

// Kind is v1alpha1.TrafficProxy.
func (Provider) Kind() string { return v1alpha1.TrafficProxy }

// Objects renders, in order, the agent's ServiceAccount, Role and RoleBinding, the
// desired ConfigMap and the Deployment; and, to create once, the status ConfigMap the
// agents write into.
func (Provider) Objects(t traffic.Traffic) (traffic.Rendered, error) {
	if t.DGD == nil {
		return traffic.Rendered{}, fmt.Errorf("proxy of %s: no DGD", t.Entry)
	}
	split, _, err := SplitOf(t)
	if err != nil {
		return traffic.Rendered{}, fmt.Errorf("proxy of %s/%s: %w", t.DGD.Namespace, t.Entry, err)
	}
	desired, err := desiredConfigMap(t, split)
	if err != nil {
		return traffic.Rendered{}, err
	}
	deploy, err := deployment(t)
	if err != nil {
		return traffic.Rendered{}, err
	}
	sa, role, binding := rbac(t)
	return traffic.Rendered{
		Apply:  []client.Object{sa, role, binding, desired, deploy},
		Create: []client.Object{statusConfigMap(t)},
	}, nil
}

// Lookups are the status ConfigMap and the Deployment.
func (Provider) Lookups(t traffic.Traffic) []client.Object {
	ns := namespace(t)
	return []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: StatusName(t)}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: Name(t)}},
	}
}

// PodLabels select the proxy's pods.
func (Provider) PodLabels(t traffic.Traffic) map[string]string { return podLabels(t) }

// EntrySelector is the proxy's pods: the entry Service sends every client to HAProxy.
func (Provider) EntrySelector(t traffic.Traffic) map[string]string { return podLabels(t) }

func namespace(t traffic.Traffic) string {
	if t.DGD == nil {
		return ""
	}
	return t.DGD.Namespace
}

func meta(t traffic.Traffic, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: t.DGD.Namespace, Labels: labels(t)}
}

// Rules are the agent's whole grant: read and watch the desired ConfigMap, read and
// patch the status ConfigMap, nothing else. A list or watch is authorized against
// resourceNames only when it carries the field selector metadata.name=<name>, which
// the agent's watch does ("If you restrict list or watch by resourceName, clients must
// include a metadata.name field selector in their list or watch request that matches
// the specified resourceName in order to be authorized",
// https://kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-resources).
func Rules(t traffic.Traffic) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{Name(t)},
			Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{StatusName(t)},
			Verbs: []string{"get", "patch"}},
	}
}

func rbac(t traffic.Traffic) (*corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding) {
	name := Name(t)
	sa := &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: meta(t, name)}
	role := &rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: meta(t, name), Rules: Rules(t)}
	binding := &rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: meta(t, name),
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: t.DGD.Namespace}}}
	return sa, role, binding
}

// desiredConfigMap holds the split as canonical JSON and its version.
func desiredConfigMap(t traffic.Traffic, s Split) (*corev1.ConfigMap, error) {
	data, err := digest.Canonical(s)
	if err != nil {
		return nil, fmt.Errorf("encoding the split of %s/%s: %w", t.DGD.Namespace, Name(t), err)
	}
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(t, Name(t)),
		Data:       map[string]string{SplitKey: string(data), VersionKey: digest.Bytes(data, nil)}}, nil
}

// statusConfigMap is created empty; each agent merges its own key into it.
func statusConfigMap(t traffic.Traffic) *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(t, StatusName(t))}
}
