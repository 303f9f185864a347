package decide

import (
	"fmt"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// Dynamo's Ingress in the take-over. On its component pathway Dynamo's DCD controller
// renders a frontend's Ingress under the DCD's name, NormalizeKubeResourceName(dcd) =
// `<dgd>-<lower(component)>`, which is ours too (`{dgd}-{service}`); it carries no
// label, only SyncResource's annotations nvidia.com/last-applied-hash and
// -generation, and the DCD as controller; its one rule is `[hostPrefix]host.<suffix>`,
// path / (Prefix), to the Service of the same name on port 8000
// (ai-dynamo/dynamo deploy/operator/internal/controller/
// dynamocomponentdeployment_controller.go createOrUpdateOrDeleteIngress,
// generateIngress; internal/dynamo/graph.go GenerateComponentIngress). The garbage
// collector deletes it with its DCD: left there, the frontend's host would have no
// Ingress from the DCD's deletion until ours is created in a later pass. So it is
// adopted, in one write, long before the DCDs go (releaseDynamo): the DGD becomes its
// controller in place of the DCD, and its labels, annotations and spec become ours
// (render.Component.Ingress: the same rule from the same services.<name>.ingress). The
// update carries the UID and resourceVersion observed: a changed or re-created
// Ingress makes it fail, and the pass retries from a fresh read. The collector judges an
// object by its owner references as the API server has them when it acts
// (garbagecollector.attemptToDeleteItem reads the object again): once the DGD, which
// exists, is its controller, the DCD's deletion leaves it alone.

// adoptDynamoIngress decides the adoption of Dynamo's Ingress under want's name, and
// reports whether there is one.
func adoptDynamoIngress(v *view, d *draft, want *networkingv1.Ingress) bool {
	if v.Dynamo == nil {
		return false
	}
	for i := range v.Dynamo.Ingresses {
		have := &v.Dynamo.Ingresses[i]
		if have.Name != want.Name {
			continue
		}
		ing := have.DeepCopy()
		takeControl(v.dgd, ing)
		copyInto(ing, want)
		d.write(Write{Op: UpdateObject, Object: ing, Kind: "Ingress",
			Say: []string{fmt.Sprintf("adopted Ingress %s (host %s) from Dynamo's operator", want.Name, ingressHosts(want))}})
		d.requeueIn(DynamoRecheck)
		return true
	}
	return false
}

// takeControl makes the DGD obj's controller in place of the one it has (Dynamo's DCD),
// keeping its other owners.
func takeControl(dgd *v1alpha1.DynamoGraphDeployment, obj metav1.Object) {
	var refs []metav1.OwnerReference
	for _, r := range obj.GetOwnerReferences() {
		if !ptr.Deref(r.Controller, false) && r.UID != dgd.UID {
			refs = append(refs, r)
		}
	}
	obj.SetOwnerReferences(append(refs, v1alpha1.ControllerRef(dgd)))
}

// ingressHosts names the hosts of an Ingress's rules.
func ingressHosts(ing *networkingv1.Ingress) string {
	hosts := make([]string, len(ing.Spec.Rules))
	for i, r := range ing.Spec.Rules {
		hosts[i] = r.Host
	}
	return strings.Join(hosts, ", ")
}

// releaseExposure decides what becomes of the objects exposing the graph that a DCD of
// Dynamo's still controls and the DGD does not render (want: "Ingress/<name>"), before
// the DCDs go (their deletion would have the garbage collector delete them), and
// reports whether the end of the take-over waits:
//   - an Ingress whose every host an Ingress of the DGD's routes (Dynamo's was named
//     otherwise: a DGD name long enough for our names to be capped), ours created and
//     admitted (the cache shows it), is deleted, ours serving the host already;
//   - another Ingress waits: Dynamo's operator also renders a frontend Ingress from its
//     own configuration (ingress controller class and host suffix:
//     internal/dynamo/graph.go GenerateDefaultIngressSpec, used by dcdIngressSpec when the
//     DGD sets none), which no spec of ours says;
//   - an Istio VirtualService waits (GenerateComponentVirtualService, rendered when
//     Dynamo's operator has a virtualServiceGateway): this operator renders none.
//
// What waits is named by a Warning Event, pass after pass, until the spec renders it (an
// Ingress: adopted), someone deletes it, or removes its owner reference to keep it.
func releaseExposure(v *view, d *draft, want map[string]bool) bool {
	var held []string
	for i := range v.Dynamo.Ingresses {
		ing := &v.Dynamo.Ingresses[i]
		switch ours := routedByOurs(v, ing); {
		case want["Ingress/"+ing.Name] || metav1.GetControllerOf(ing) == nil:
		case ours != "":
			d.write(Write{Op: DeleteObject, Object: ing, Kind: "Ingress",
				Say: []string{fmt.Sprintf("deleted Dynamo's Ingress %s (host %s routed by Ingress %s)", ing.Name, ingressHosts(ing), ours)}})
		default:
			held = append(held, fmt.Sprintf("Ingress %s (host %s), which this DGD does not render (services.<frontend>.ingress)", ing.Name, ingressHosts(ing)))
		}
	}
	for _, vs := range v.Dynamo.VirtualServices {
		held = append(held, vs.String()+", which this operator does not render")
	}
	if len(held) == 0 {
		return false
	}
	d.takeOverHeld = fmt.Sprintf("the take-over of %s/%s waits before deleting Dynamo's %ss, whose deletion would have the garbage collector delete what they control: %s; render it, delete it, or remove its owner reference to keep it",
		v.dgd.Namespace, v.dgd.Name, DCDKind, strings.Join(held, "; "))
	d.event("Warning", v1alpha1.EventDynamoIngressHeld, d.takeOverHeld)
	return true
}

// routedByOurs is the name of the DGD's Ingress that routes every host of ing, or "".
func routedByOurs(v *view, ing *networkingv1.Ingress) string {
	for i := range v.Objects.Ingresses {
		ours := &v.Objects.Ingresses[i]
		if len(ing.Spec.Rules) > 0 && !slices.ContainsFunc(ing.Spec.Rules, func(r networkingv1.IngressRule) bool {
			return !slices.ContainsFunc(ours.Spec.Rules, func(o networkingv1.IngressRule) bool { return o.Host == r.Host })
		}) {
			return ours.Name
		}
	}
	return ""
}
