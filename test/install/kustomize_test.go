package install

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/dgd-rollout/operator/test/cluster"
)

// kubectlApply applies objs as `kubectl apply --server-side` does: each object in the
// order given (kustomize's), an apply patch with the field manager "kubectl", conflicts
// not forced.
func kubectlApply(t *testing.T, e *env, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		raw, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		target := &unstructured.Unstructured{}
		target.SetGroupVersionKind(o.GroupVersionKind())
		target.SetNamespace(o.GetNamespace())
		target.SetName(o.GetName())
		if err := e.k8s.Patch(context.Background(), target, client.RawPatch(types.ApplyPatchType, raw), client.FieldOwner("kubectl")); err != nil {
			t.Fatalf("kubectl apply --server-side: %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

// TestKustomize: `kubectl apply --server-side -k config/default`, as the README says,
// against the local control plane: config/default built with kustomize's own library at
// kubectl's version (sigs.k8s.io/kustomize/api v0.21.1, which k8s.io/cli-runtime v0.36.2
// vendors into kubectl), every object accepted server-side (the CRD is past client-side
// apply's 262,144-byte annotation), in kubectl's order, the manager started from the Deployment's args and
// env under its ServiceAccount and config/rbac, its webhook certificate made and the CRD
// pointed at its Service, and the same apply run again (an upgrade) without a conflict
// over the fields the manager wrote since.
func TestKustomize(t *testing.T) {
	e := getEnv(t)
	ctx := context.Background()
	begin := time.Now()
	e.deleteCRD(t)
	// kubectl's -k: k8s.io/cli-runtime v0.36.2 pkg/resource/kustomizevisitor.go, Visit
	// (default options, legacy reordering: Namespaces and CRDs first).
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy
	k := krusty.MakeKustomizer(opts)
	res, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(cluster.RepoRoot(), "config", "default"))
	if err != nil {
		t.Fatalf("kustomize build config/default: %v", err)
	}
	raw, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	kubectlApply(t, e, objs)
	const ns = "dgd-rollout-system"
	dep := into[appsv1.Deployment](t, find(objs, "Deployment", ns, "dgd-rollout-controller-manager"))
	op := e.startPod(t, dep.Spec.Template.Spec, ns)
	var secret corev1.Secret
	if err := e.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dgd-rollout-webhook-cert"}, &secret); err != nil {
		t.Fatalf("the manager's webhook Secret: %v", err)
	}
	if find(objs, "Service", ns, "dgd-rollout-webhook-service") == nil || find(objs, "Service", ns, "dgd-rollout-metrics-service") == nil {
		t.Errorf("config/default lacks the webhook or metrics Service")
	}
	e.checkWebhook(t, "dgd-rollout-webhook-service", ns, op.port(t, "webhook-server"))
	checkForbidden(t, op)

	kubectlApply(t, e, objs) // the upgrade: the same command again
	if cc := e.crd(t).Spec.Conversion.Webhook.ClientConfig; len(cc.CABundle) == 0 {
		t.Errorf("re-applying config/default dropped the caBundle the manager injected")
	}
	op.stop()

	// Without a CRD (helm install --skip-crds), apply-crds under the same RBAC (patch on
	// the CRD by name) cannot create it: the API server authorizes an apply that creates
	// as a create, which the operator is not granted (it would cover every CRD). It says
	// so, and what to do.
	e.deleteCRD(t)
	sa := dep.Spec.Template.Spec.ServiceAccountName
	apply := corev1.Container{Name: "apply-crds", Command: []string{"/manager", "apply-crds"},
		Args: []string{"--webhook-service-name=dgd-rollout-webhook-service", "--webhook-service-namespace=" + ns}}
	r := prepare(t, apply, ns, e.saKubeconfig(t, ns, sa))
	if err := e.runErr(t, r); err == nil || len(r.logHas("install it first")) == 0 {
		t.Errorf("apply-crds without a CRD: %v, want a refusal saying to install the CRD first:\n%s", err, r.tail(5))
	}
	for i := len(objs) - 1; i >= 0; i-- {
		if objs[i].GetKind() != "CustomResourceDefinition" {
			_ = e.k8s.Delete(ctx, objs[i])
		}
	}
	e.deleteCRD(t)
	t.Logf("apply, manager up, re-apply: %s", time.Since(begin).Round(time.Second))
}
