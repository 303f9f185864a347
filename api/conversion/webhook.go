package conversion

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	crconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
)

// Converter is the DynamoGraphDeployment converter the /convert webhook serves
// (controller-runtime's hub-and-spoke converter over ToHub and FromHub). It is
// stateless: each object converts from itself alone.
func Converter() func(*runtime.Scheme) (crconversion.Converter, error) {
	return crconversion.NewHubSpokeConverter(&v1beta1.DynamoGraphDeployment{},
		crconversion.NewSpokeConverter(&v1alpha1.DynamoGraphDeployment{},
			func(_ context.Context, src *v1beta1.DynamoGraphDeployment, dst *v1alpha1.DynamoGraphDeployment) error {
				return FromHub(src, dst)
			},
			func(_ context.Context, src *v1alpha1.DynamoGraphDeployment, dst *v1beta1.DynamoGraphDeployment) error {
				return ToHub(src, dst)
			}))
}
