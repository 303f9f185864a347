// Command crdfix post-processes the generated DynamoGraphDeployment CRD so that Dynamo's
// own manifests apply: the embedded PodSpec of extraPodSpec makes `containers` required
// and the Container type makes mainContainer.name required, but Dynamo manifests give
// only extraPodSpec.mainContainer, without a name. Both requirements are dropped.
//
// It adds the API server's own rules for the strings the operator copies into the
// objects it writes, where kubebuilder markers cannot reach them: Kubernetes' types
// embedded in both versions (EnvVar, Container, Volume, PodSpec) and the label and
// annotation maps of a pod's metadata (strings.go).
//
// It also sets spec.conversion: strategy Webhook, served at /convert by the operator
// behind the Service config/default deploys (dgd-rollout-webhook-service in
// dgd-rollout-system); the operator fills in the caBundle (--webhook-cert-mode), and
// make run and the test suites point it at 127.0.0.1 (--webhook-url).
//
// Usage: go run ./hack/crdfix config/crd/bases/nvidia.com_dynamographdeployments.yaml
package main

import (
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdfix CRD.yaml")
		os.Exit(2)
	}
	if err := fix(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "crdfix:", err)
		os.Exit(1)
	}
}

func fix(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		return err
	}
	for i := range crd.Spec.Versions {
		root := crd.Spec.Versions[i].Schema.OpenAPIV3Schema
		if _, err := fixStrings(crd.Spec.Versions[i].Name, root); err != nil {
			return err
		}
		services, ok := root.Properties["spec"].Properties["services"]
		if !ok {
			continue // v1beta1: components carry a full podTemplate, as Dynamo's does
		}
		svc := services.AdditionalProperties.Schema
		eps, ok := svc.Properties["extraPodSpec"]
		if !ok {
			return fmt.Errorf("no extraPodSpec in %s", crd.Spec.Versions[i].Name)
		}
		eps.Required = without(eps.Required, "containers")
		main := eps.Properties["mainContainer"]
		main.Required = without(main.Required, "name") // defaulted to "main" by the operator
		eps.Properties["mainContainer"] = main
		svc.Properties["extraPodSpec"] = eps
		root.Properties["spec"].Properties["services"] = services
	}
	convertPath, port := "/convert", int32(443)
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
			ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{
				Name: "dgd-rollout-webhook-service", Namespace: "dgd-rollout-system", Path: &convertPath, Port: &port}}}}
	out, err := yaml.Marshal(&crd)
	if err != nil {
		return err
	}
	// Drop the status stanza that a typed round trip adds to a generated CRD.
	var obj map[string]any
	if err := yaml.Unmarshal(out, &obj); err != nil {
		return err
	}
	delete(obj, "status")
	if md, ok := obj["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
		delete(md, "creationTimestamp")
	}
	out, err = yaml.Marshal(obj)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}

func without(list []string, drop string) []string {
	var out []string
	for _, s := range list {
		if s != drop {
			out = append(out, s)
		}
	}
	return out
}
