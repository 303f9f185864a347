package dynamoview

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Publish plays the Dynamo runtime of every running worker pod: for each pod in phase
// Running, not being deleted, with a uid and a registering worker runtime (RuntimeOf,
// IsWorker), it creates the DWM that Metadata renders when none exists (AlreadyExists is
// ignored). When a DWM of that name exists but is owned by another pod uid (the pod was
// recreated under the same name), it is overwritten, as the runtime's forced
// server-side apply would (lib/runtime/src/discovery/kube/mod.rs, apply_cr). Frontend
// pods are skipped: their DWM carries only admission event sources, which this package
// does not model. It is meant for integration tests; it needs the DWM CRD installed.
func Publish(ctx context.Context, c client.Client, pods []corev1.Pod) error {
	for i := range pods {
		pod := &pods[i]
		if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil || pod.UID == "" {
			continue
		}
		rt, ok := RuntimeOf(pod)
		if !ok || !rt.IsWorker() {
			continue
		}
		want := Metadata(pod, rt)
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(DWMGVK)
		err := c.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, cur)
		switch {
		case apierrors.IsNotFound(err):
			if err := c.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create DWM %s/%s: %w", pod.Namespace, pod.Name, err)
			}
		case err != nil:
			return fmt.Errorf("get DWM %s/%s: %w", pod.Namespace, pod.Name, err)
		case PodOwnerUID(cur) != string(pod.UID):
			want.SetResourceVersion(cur.GetResourceVersion())
			err := c.Update(ctx, want)
			if apierrors.IsNotFound(err) { // garbage-collected meanwhile
				want.SetResourceVersion("")
				err = c.Create(ctx, want)
			}
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("take over DWM %s/%s: %w", pod.Namespace, pod.Name, err)
			}
		}
	}
	return nil
}
