package harness

import (
	"context"
	"os"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/api/v1beta1"
)

// ReadBeta reads a v1beta1 DGD manifest (strict: every field must be known).
func ReadBeta(path string) (*v1beta1.DynamoGraphDeployment, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d v1beta1.DynamoGraphDeployment
	if err := yaml.UnmarshalStrict(raw, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// UpdateBeta applies change to the live DGD read and written as v1beta1 (Dynamo's
// current API), retrying on conflicts.
func UpdateBeta(ctx context.Context, c client.Client, ns, name string, change func(*v1beta1.DynamoGraphDeployment)) error {
	for {
		var d v1beta1.DynamoGraphDeployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
			return err
		}
		change(&d)
		err := c.Update(ctx, &d)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// BetaImage returns a change that sets the main image of every worker, prefill and
// decode component.
func BetaImage(img string) func(*v1beta1.DynamoGraphDeployment) {
	return func(d *v1beta1.DynamoGraphDeployment) {
		for i := range d.Spec.Components {
			c := &d.Spec.Components[i]
			switch c.ComponentType {
			case v1beta1.ComponentTypeWorker, v1beta1.ComponentTypePrefill, v1beta1.ComponentTypeDecode:
			default:
				continue
			}
			for j := range c.PodTemplate.Spec.Containers {
				if c.PodTemplate.Spec.Containers[j].Name == v1beta1.MainContainerName {
					c.PodTemplate.Spec.Containers[j].Image = img
				}
			}
		}
	}
}
