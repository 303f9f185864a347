package decide

import (
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
)

// The objects a DGD's pods need besides their workloads (Services, Ingresses, RBAC, a
// ConfigMap) are applied alike: created when missing, updated when what the operator
// renders differs (no write when nothing differs), and never taken from someone else.

// kindOf names an object's kind for messages and Lookup keys.
func kindOf(o client.Object) string {
	switch o.(type) {
	case *corev1.Service:
		return "Service"
	case *networkingv1.Ingress:
		return "Ingress"
	case *corev1.ServiceAccount:
		return "ServiceAccount"
	case *rbacv1.Role:
		return "Role"
	case *rbacv1.RoleBinding:
		return "RoleBinding"
	case *corev1.ConfigMap:
		return "ConfigMap"
	case *corev1.Secret:
		return "Secret"
	case *appsv1.Deployment:
		return "Deployment"
	case *gatewayv1.HTTPRoute:
		return "HTTPRoute"
	case *gatewayv1.Gateway:
		return "Gateway"
	}
	return fmt.Sprintf("%T", o)
}

// owned sets on want the DGD as its controller or, for an object shared with other
// DGDs, as one of its owners (as controllerutil's SetControllerReference and
// SetOwnerReference do for the DGD's kind).
func owned(dgd *v1alpha1.DynamoGraphDeployment, want client.Object, controller bool) {
	ref := v1alpha1.ControllerRef(dgd)
	if !controller {
		ref = v1alpha1.OwnerRef(dgd)
	}
	want.SetOwnerReferences([]metav1.OwnerReference{ref})
}

// dgdKind is the kind of a DGD in owner references.
const dgdKind = "DynamoGraphDeployment"

// apply decides the write that makes want so, given have, the object of its name as the
// cache shows it (nil: none): a create when there is none; nothing when have is the
// DGD's and the same (same); an update of have when it differs or the DGD is not yet
// one of its owners; a name conflict when the DGD is to control it and does not.
func apply(dgd *v1alpha1.DynamoGraphDeployment, d *draft, want, have client.Object, controller bool, same func(have, want client.Object) bool) {
	owned(dgd, want, controller)
	kind := kindOf(want)
	switch {
	case have == nil:
		d.write(Write{Op: CreateObject, Object: want, Kind: kind, Controller: controller,
			Say: []string{fmt.Sprintf("created %s %s", kind, want.GetName())}})
		return
	case controller && !metav1.IsControlledBy(have, dgd):
		d.conflict(backends.NotControlled(kind, have, dgd))
		return
	}
	isOwner := hasOwner(have, dgd)
	if same(have, want) && isOwner {
		return
	}
	upd := have.DeepCopyObject().(client.Object)
	if !isOwner {
		upd.SetOwnerReferences(append(upd.GetOwnerReferences(), want.GetOwnerReferences()...))
	}
	copyInto(upd, want)
	d.write(Write{Op: UpdateObject, Object: upd, Kind: kind})
}

// disown decides the write that removes the DGD from have's owners: an update, or the
// object's deletion when the DGD was its last owner (it goes with its last owner).
func disown(dgd *v1alpha1.DynamoGraphDeployment, d *draft, have client.Object) {
	if have == nil || !hasOwner(have, dgd) {
		return
	}
	var refs []metav1.OwnerReference
	for _, r := range have.GetOwnerReferences() {
		if r.UID != dgd.UID {
			refs = append(refs, r)
		}
	}
	if len(refs) == 0 {
		d.write(Write{Op: DeleteObject, Object: have, Kind: kindOf(have)})
		return
	}
	upd := have.DeepCopyObject().(client.Object)
	upd.SetOwnerReferences(refs)
	d.write(Write{Op: UpdateObject, Object: upd, Kind: kindOf(have)})
}

func hasOwner(o client.Object, dgd *v1alpha1.DynamoGraphDeployment) bool {
	for _, r := range o.GetOwnerReferences() {
		if r.UID == dgd.UID {
			return true
		}
	}
	return false
}

// copyInto copies what the operator renders from want into have, keeping what the API
// server and others set (cluster IPs, resource versions, other owners).
func copyInto(have, want client.Object) {
	labels := have.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, want.GetLabels())
	have.SetLabels(labels)
	switch h := have.(type) {
	case *corev1.Service:
		w := want.(*corev1.Service)
		h.Spec.Selector, h.Spec.Ports, h.Spec.Type = w.Spec.Selector, w.Spec.Ports, w.Spec.Type
	case *networkingv1.Ingress:
		h.Spec = want.(*networkingv1.Ingress).Spec
		h.Annotations = want.GetAnnotations()
	case *rbacv1.Role:
		h.Rules = want.(*rbacv1.Role).Rules
	case *rbacv1.RoleBinding:
		h.Subjects = want.(*rbacv1.RoleBinding).Subjects
	case *corev1.ConfigMap:
		h.Data = want.(*corev1.ConfigMap).Data
	case *appsv1.Deployment:
		// The whole spec: the cached copy lacks the pod spec (app.CacheOptions), and the
		// update writes the object whole under the cached resourceVersion.
		h.Spec = want.(*appsv1.Deployment).Spec
		ann := h.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		maps.Copy(ann, want.GetAnnotations())
		h.SetAnnotations(ann)
	case *gatewayv1.HTTPRoute:
		h.Spec = want.(*gatewayv1.HTTPRoute).Spec
	}
}

func sameLabels(have, want client.Object) bool {
	for k, v := range want.GetLabels() {
		if have.GetLabels()[k] != v {
			return false
		}
	}
	return true
}

func sameService(have, want client.Object) bool {
	h, w := have.(*corev1.Service), want.(*corev1.Service)
	return sameLabels(have, want) && maps.Equal(h.Spec.Selector, w.Spec.Selector) && h.Spec.Type == w.Spec.Type &&
		len(h.Spec.Ports) == len(w.Spec.Ports) && h.Spec.Ports[0].Name == w.Spec.Ports[0].Name &&
		h.Spec.Ports[0].Port == w.Spec.Ports[0].Port && h.Spec.Ports[0].TargetPort == w.Spec.Ports[0].TargetPort
}

func sameIngress(have, want client.Object) bool {
	return sameLabels(have, want) && maps.Equal(have.GetAnnotations(), want.GetAnnotations()) &&
		equality.Semantic.DeepEqual(have.(*networkingv1.Ingress).Spec, want.(*networkingv1.Ingress).Spec)
}

func sameRole(have, want client.Object) bool {
	return sameLabels(have, want) && equality.Semantic.DeepEqual(have.(*rbacv1.Role).Rules, want.(*rbacv1.Role).Rules)
}

func sameBinding(have, want client.Object) bool {
	h, w := have.(*rbacv1.RoleBinding), want.(*rbacv1.RoleBinding)
	return sameLabels(have, want) && equality.Semantic.DeepEqual(h.Subjects, w.Subjects) && h.RoleRef == w.RoleRef
}

func sameConfigMap(have, want client.Object) bool {
	return sameLabels(have, want) && maps.Equal(have.(*corev1.ConfigMap).Data, want.(*corev1.ConfigMap).Data)
}

// sameDeployment compares a Deployment the cache holds without its pod spec: by the
// template hash the pass stamped on what it renders (stampTemplate), its replicas and
// labels.
func sameDeployment(have, want client.Object) bool {
	h, w := have.(*appsv1.Deployment), want.(*appsv1.Deployment)
	return sameLabels(have, want) && h.Annotations[backends.AnnotationTemplateHash] == w.Annotations[backends.AnnotationTemplateHash] &&
		equality.Semantic.DeepEqual(h.Spec.Replicas, w.Spec.Replicas)
}

// stampTemplate puts on a rendered Deployment the hash of its spec, which
// sameDeployment compares (the cached copy has no pod spec to compare).
func stampTemplate(o client.Object) {
	d, ok := o.(*appsv1.Deployment)
	if !ok {
		return
	}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[backends.AnnotationTemplateHash] = backends.TemplateHash(corev1.PodTemplateSpec{
		ObjectMeta: d.Spec.Template.ObjectMeta, Spec: d.Spec.Template.Spec})
}

// sameObject compares what the pass renders of a traffic provider's object with what
// the cache holds, by kind; an HTTPRoute by the provider's Comparer when it has one.
func sameObject(have, want client.Object) bool {
	switch want.(type) {
	case *corev1.ConfigMap:
		return sameConfigMap(have, want)
	case *rbacv1.Role:
		return sameRole(have, want)
	case *rbacv1.RoleBinding:
		return sameBinding(have, want)
	case *appsv1.Deployment:
		return sameDeployment(have, want)
	case *gatewayv1.HTTPRoute:
		h, w := have.(*gatewayv1.HTTPRoute), want.(*gatewayv1.HTTPRoute)
		return sameLabels(have, want) && equality.Semantic.DeepEqual(h.Spec, w.Spec)
	}
	return sameLabels(have, want)
}
