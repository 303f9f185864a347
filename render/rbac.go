package render

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"math/big"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// Discovery RBAC names (Dynamo discovery/resource.go).
func discoveryRole(dgd string) string    { return DiscoveryServiceAccount(dgd) + "-role" }
func discoveryBinding(dgd string) string { return DiscoveryServiceAccount(dgd) + "-binding" }

// Planner RBAC names (Dynamo's namespace-restricted Helm chart: planner-role,
// planner-binding), shared by every DGD of a namespace.
const (
	PlannerRole    = "planner-role"
	PlannerBinding = "planner-binding"
)

// DiscoveryRules are what a pod needs for Kubernetes discovery: read pods, endpoints and
// EndpointSlices, and publish its DynamoWorkerMetadata.
var DiscoveryRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"endpoints", "pods"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"nvidia.com"}, Resources: []string{"dynamoworkermetadatas"}, Verbs: []string{"create", "get", "list", "watch", "update", "patch", "delete"}},
}

// PlannerRules are what Dynamo's planner needs: read and scale DGDs (it writes their
// replicas), read EndpointSlices and pods, and, as any Dynamo runtime under Kubernetes
// discovery, publish its DynamoWorkerMetadata.
var PlannerRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"nvidia.com"}, Resources: []string{"dynamographdeployments"}, Verbs: []string{"get", "list", "update", "patch"}},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
	{APIGroups: []string{"nvidia.com"}, Resources: []string{"dynamoworkermetadatas"}, Verbs: []string{"create", "get", "list", "watch", "update", "patch", "delete"}},
}

func rbacLabels(name string) map[string]string {
	return map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, "app.kubernetes.io/component": "rbac", "app.kubernetes.io/name": FitLabelValue(name)}
}

// RBAC is a service account with a Role bound to it.
type RBAC struct {
	ServiceAccount *corev1.ServiceAccount
	Role           *rbacv1.Role
	Binding        *rbacv1.RoleBinding
}

func newRBAC(ns, sa, role, binding string, rules []rbacv1.PolicyRule) RBAC {
	return RBAC{
		ServiceAccount: &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns, Labels: rbacLabels(sa)}},
		Role: &rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: metav1.ObjectMeta{Name: role, Namespace: ns, Labels: rbacLabels(sa)}, Rules: rules},
		Binding: &rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: binding, Namespace: ns, Labels: rbacLabels(sa)},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}},
	}
}

// DiscoveryRBAC is a DGD's `<dgd>-k8s-service-discovery` service account, Role and
// RoleBinding.
func DiscoveryRBAC(dgd *v1alpha1.DynamoGraphDeployment) RBAC {
	return newRBAC(dgd.Namespace, DiscoveryServiceAccount(dgd.Name), discoveryRole(dgd.Name), discoveryBinding(dgd.Name), DiscoveryRules)
}

// PlannerRBAC is the planner's service account, Role and RoleBinding of a namespace.
func PlannerRBAC(ns string) RBAC {
	return newRBAC(ns, PlannerServiceAccount, PlannerRole, PlannerBinding, PlannerRules)
}

// waitForLeaderScript waits until LEADER_HOST accepts TCP connections on LEADER_PORT,
// retrying every 5 s (its DNS record may not exist yet) and saying so every 30 s.
const waitForLeaderScript = `import os, socket, sys, time

host, port = os.environ["LEADER_HOST"], int(os.environ["LEADER_PORT"])
start = last = time.monotonic()
while True:
    try:
        socket.create_connection((host, port), timeout=3).close()
        print(f"leader {host}:{port} is up after {time.monotonic() - start:.0f}s", flush=True)
        sys.exit(0)
    except OSError as err:
        if time.monotonic() - last >= 30:
            print(f"waiting for leader {host}:{port}: {err}", flush=True)
            last = time.monotonic()
    time.sleep(5)
`

// WaitLeaderScript is the ConfigMap of a DGD's wait-for-leader script.
func WaitLeaderScript(dgd *v1alpha1.DynamoGraphDeployment) *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: WaitLeaderConfigMap(dgd.Name), Namespace: dgd.Namespace,
			Labels: map[string]string{v1alpha1.LabelGraph: dgd.Name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}},
		Data: map[string]string{WaitLeaderScriptKey: waitForLeaderScript}}
}

// NewSSHKeySecret generates a TRT-LLM gang's SSH key pair (2048-bit RSA, as Dynamo's
// SSHKeyManager): `private.key` in PEM (PKCS #1), `private.key.pub` in authorized_keys
// form.
func NewSSHKeySecret(ns, name string, labels map[string]string) (*corev1.Secret, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"private.key": priv, "private.key.pub": authorizedKey(&key.PublicKey)}}, nil
}

// authorizedKey is an RSA public key as an OpenSSH authorized_keys line (RFC 4253
// ssh-rsa: string "ssh-rsa", mpint e, mpint n).
func authorizedKey(k *rsa.PublicKey) []byte {
	var b bytes.Buffer
	writeString := func(s []byte) {
		_ = binary.Write(&b, binary.BigEndian, uint32(len(s)))
		b.Write(s)
	}
	mpint := func(n *big.Int) {
		raw := n.Bytes()
		if len(raw) > 0 && raw[0]&0x80 != 0 {
			raw = append([]byte{0}, raw...)
		}
		writeString(raw)
	}
	writeString([]byte("ssh-rsa"))
	mpint(big.NewInt(int64(k.E)))
	mpint(k.N)
	return []byte("ssh-rsa " + base64.StdEncoding.EncodeToString(b.Bytes()) + "\n")
}
