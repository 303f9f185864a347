package app

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"path"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/config/crd"
)

// The rule below names every CRD this binary embeds (the DGD's and the analysis
// templates'): ApplyCRDs patches each, and gets it until it is Established.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,resourceNames=dynamographdeployments.nvidia.com;analysistemplates.nvidia.com;clusteranalysistemplates.nvidia.com,verbs=get;patch

// CRDFieldManager is the field manager of `manager apply-crds`: the fields of the CRDs it
// applies are its own, apart from the conversion webhook's caBundle, which it never sets
// (the running operator, or cert-manager's CA injector, owns it).
const CRDFieldManager = "dgd-rollout-crd-apply"

// AnnotationInjectCAFrom is cert-manager's CA injector annotation: the CRD's conversion
// caBundle is the ca.crt of that Certificate's Secret (namespace/name).
const AnnotationInjectCAFrom = "cert-manager.io/inject-ca-from"

// CRDApplyOptions configure ApplyCRDs.
type CRDApplyOptions struct {
	// Webhook is where the CRD's conversion points (Service name, namespace and port, or
	// URL), as the manager's own flags say.
	Webhook WebhookOptions
	// InjectCAFrom, when set (cert-manager mode), annotates the CRD for cert-manager's CA
	// injector: namespace/certificate.
	InjectCAFrom string
}

// CRDApplyFlags binds the flags of `manager apply-crds`: the webhook's Service flags (the
// same names and defaults as the manager's) and --inject-ca-from.
func CRDApplyFlags(fs *flag.FlagSet, o *CRDApplyOptions) {
	o.Webhook = DefaultWebhookOptions()
	fs.StringVar(&o.Webhook.ServiceName, "webhook-service-name", o.Webhook.ServiceName, "Service in front of the manager's conversion webhook")
	fs.StringVar(&o.Webhook.ServiceNamespace, "webhook-service-namespace", o.Webhook.ServiceNamespace, "namespace of that Service (default $POD_NAMESPACE)")
	fs.StringVar(&o.Webhook.URL, "webhook-url", "", "point the conversion at this URL instead of the Service")
	fs.StringVar(&o.InjectCAFrom, "inject-ca-from", "", "with cert-manager: namespace/name of the webhook's Certificate, written as the CRD annotation "+AnnotationInjectCAFrom)
}

// EmbeddedCRDs are the CRDs this binary was built with (config/crd/bases).
func EmbeddedCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(crd.Bases, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		raw, err := fs.ReadFile(crd.Bases, f)
		if err != nil {
			return nil, err
		}
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, c); err != nil {
			return nil, fmt.Errorf("%s: %w", path.Base(f), err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CRD embedded in this binary")
	}
	return out, nil
}

// ApplyCRDs applies the embedded CRDs server-side with the field manager CRDFieldManager
// (forcing conflicts: whoever wrote a field before, a Helm install's crds/, kubectl, or
// Dynamo's crd-apply, this binary's CRD wins) and waits until each is Established. It is
// how a Helm upgrade upgrades the CRD: Helm creates crds/ on the first install and never
// again, and the CRD (1.5 MB as YAML) is far past client-side apply's 262,144-byte
// last-applied annotation. Each CRD's conversion points at o.Webhook's Service (or URL),
// without a caBundle: the field stays the running operator's (self-signed) or
// cert-manager's, so applying never breaks conversion.
func ApplyCRDs(ctx context.Context, cfg *rest.Config, o CRDApplyOptions) error {
	crds, err := EmbeddedCRDs()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		return err
	}
	for _, want := range crds {
		if err := applyCRD(ctx, c, want, o); err != nil {
			return err
		}
	}
	for _, want := range crds {
		if err := waitEstablished(ctx, c, want.Name); err != nil {
			return err
		}
		ctrl.Log.Info("CRD applied", "crd", want.Name, "fieldManager", CRDFieldManager)
	}
	return nil
}

func applyCRD(ctx context.Context, c client.Client, want *apiextensionsv1.CustomResourceDefinition, o CRDApplyOptions) error {
	want = want.DeepCopy()
	want.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if conv := want.Spec.Conversion; conv != nil && conv.Strategy == apiextensionsv1.WebhookConverter {
		if o.Webhook.URL == "" && o.Webhook.ServiceNamespace == "" {
			return fmt.Errorf("CRD %s converts through a webhook: --webhook-service-namespace (or $POD_NAMESPACE) is needed", want.Name)
		}
		want.Spec.Conversion = ConversionConfig(o.Webhook, nil)
	}
	if o.InjectCAFrom != "" && want.Spec.Conversion != nil && want.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
		if want.Annotations == nil {
			want.Annotations = map[string]string{}
		}
		want.Annotations[AnnotationInjectCAFrom] = o.InjectCAFrom
	}
	raw, err := json.Marshal(want)
	if err != nil {
		return err
	}
	obj := &apiextensionsv1.CustomResourceDefinition{}
	obj.Name = want.Name
	force := true
	err = c.Patch(ctx, obj, client.RawPatch(types.ApplyPatchType, raw), &client.PatchOptions{FieldManager: CRDFieldManager, Force: &force})
	if apierrors.IsForbidden(err) && apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: want.Name}, obj)) {
		// An apply that creates is authorized as a create, which the operator's RBAC does
		// not grant (it would cover every CRD of the cluster).
		return fmt.Errorf("CRD %s does not exist and this ServiceAccount may only update it: install it first (Helm's crds/, i.e. helm install without --skip-crds, or kubectl apply --server-side -f config/crd/bases): %w", want.Name, err)
	}
	if err != nil {
		return fmt.Errorf("applying CRD %s server-side: %w", want.Name, err)
	}
	return setNames(ctx, c, obj, want)
}

// setNames sets the CRD's names whole where the apply left others. Server-side apply
// removes a field the applied object no longer has only when no other manager owns it,
// and whoever created the CRD (a Helm install's crds/, kubectl) owns every field it
// wrote: the short names or categories of an older CRD would stay when the new one has
// none. (A list the new CRD still has is replaced whole: versions, shortNames and
// categories are atomic lists, apiextensions/v1 types.go +listType=atomic, and the
// apply forces; so only a field left out entirely can outlive its CRD.) kubectl
// expands a category before it reads a short name (cli-runtime
// Builder.ReplaceAliases), so the AnalysisTemplates' old category "dgd" made
// "kubectl get dgd" list them and no DGD.
// The names are this binary's alone. live is the CRD the apply answered with.
func setNames(ctx context.Context, c client.Client, live, want *apiextensionsv1.CustomResourceDefinition) error {
	if equality.Semantic.DeepEqual(live.Spec.Names, want.Spec.Names) {
		return nil
	}
	patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/names", "value": want.Spec.Names}})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(CRDFieldManager)); err != nil {
		return fmt.Errorf("setting the names of CRD %s: %w", want.Name, err)
	}
	ctrl.Log.Info("CRD names set", "crd", want.Name, "categories", want.Spec.Names.Categories, "shortNames", want.Spec.Names.ShortNames)
	return nil
}

// waitEstablished waits (a minute at most) until the CRD named name is Established.
func waitEstablished(ctx context.Context, c client.Client, name string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var got apiextensionsv1.CustomResourceDefinition
		err := c.Get(ctx, client.ObjectKey{Name: name}, &got)
		if err == nil {
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not Established: %w", name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
