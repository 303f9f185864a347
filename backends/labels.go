package backends

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RestoreLabels puts back any of want's labels missing from or changed on obj (someone
// stripped them by hand, e.g. with kubectl replace). Selecting by these labels is how
// users and the plugin find a DGD's workloads. No write when they are all in place.
func RestoreLabels(ctx context.Context, c client.Client, obj client.Object, want map[string]string) error {
	have := obj.GetLabels()
	missing := false
	for k, v := range want {
		if have[k] != v {
			missing = true
		}
	}
	if !missing {
		return nil
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	if have == nil {
		have = map[string]string{}
	}
	for k, v := range want {
		have[k] = v
	}
	obj.SetLabels(have)
	if err := c.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("restoring the labels of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
