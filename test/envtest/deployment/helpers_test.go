package deployment_test

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func metav1GetControllerOf(obj client.Object) *metav1.OwnerReference {
	return metav1.GetControllerOf(obj)
}
