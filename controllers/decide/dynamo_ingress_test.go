package decide_test

import (
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/test/harness"
)

// ingressHost is the frontend's external host in these tests.
const ingressHost = "g.example.com"

// dynamoIngress is the Ingress Dynamo's DCD controller makes for the frontend DCD
// g-frontend (ai-dynamo/dynamo deploy/operator/internal/controller/
// dynamocomponentdeployment_controller.go generateIngress, internal/dynamo/graph.go
// GenerateComponentIngress; controller_common.SyncResource): named after the DCD, no
// label, Dynamo's last-applied annotations, the DCD as controller, one rule to the
// Service of its name on port 8000.
func dynamoIngress(dgd *v1alpha1.DynamoGraphDeployment) networkingv1.Ingress {
	return networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: dgd.Namespace, Name: "g-frontend", UID: "uid-ingress", ResourceVersion: "7",
			Annotations: map[string]string{"nvidia.com/last-applied-hash": "abc", "nvidia.com/last-applied-generation": "1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "nvidia.com/v1beta1", Kind: decide.DCDKind, Name: "g-frontend",
				UID: "uid-dcd-g-frontend", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("nginx"), Rules: []networkingv1.IngressRule{{Host: ingressHost,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: "g-frontend", Port: networkingv1.ServiceBackendPort{Number: 8000}}}}}}}}}},
	}
}

// ingressHandover is newHandover (Lease held) with Dynamo's frontend Ingress, and the
// same ingress in the DGD's spec when renders.
func ingressHandover(renders bool) *handover {
	dgd := harness.NewDGD("ns", "g").Disagg(2, 2, "img:1").Rollout("1", "0").Obj()
	if renders {
		dgd.Spec.Services["Frontend"].Ingress = &v1alpha1.IngressSpec{Enabled: true, Host: "g", HostSuffix: ptr.To("example.com"),
			IngressControllerClassName: ptr.To("nginx")}
	}
	h := newHandover(dgd, "Lease dynamo-operator-namespace-scope held")
	h.dy.Ingresses = []networkingv1.Ingress{dynamoIngress(dgd)}
	return h
}

// playIngress plays a write of an Ingress: an update moves Dynamo's (same UID) into the
// DGD's; a create while Dynamo's of the name is there is refused (AlreadyExists); a
// delete (Dynamo's: the only Ingress the take-over deletes) removes it.
func (h *handover) playIngress(t *testing.T, wr decide.Write) {
	t.Helper()
	ing := *wr.Object.(*networkingv1.Ingress).DeepCopy()
	dynamos := h.dy != nil && slices.ContainsFunc(h.dy.Ingresses, func(i networkingv1.Ingress) bool { return i.Name == ing.Name })
	switch wr.Op {
	case decide.UpdateObject:
		if h.dy != nil {
			h.dy.Ingresses = slices.DeleteFunc(h.dy.Ingresses, func(i networkingv1.Ingress) bool { return i.UID == ing.UID })
		}
		h.objects.Ingresses = slices.DeleteFunc(h.objects.Ingresses, func(i networkingv1.Ingress) bool { return i.UID == ing.UID })
		h.objects.Ingresses = append(h.objects.Ingresses, ing)
	case decide.DeleteObject:
		h.dy.Ingresses = slices.DeleteFunc(h.dy.Ingresses, func(i networkingv1.Ingress) bool { return i.Name == ing.Name })
	case decide.CreateObject:
		if dynamos {
			t.Errorf("created Ingress %s over Dynamo's (AlreadyExists)", ing.Name)
			return
		}
		ing.UID = types.UID("uid-ours-" + ing.Name)
		h.objects.Ingresses = append(h.objects.Ingresses, ing)
	}
}

// exposed reports whether an Ingress, Dynamo's or the DGD's, routes host.
func (h *handover) exposed(host string) bool {
	var all []networkingv1.Ingress
	if h.dy != nil {
		all = append(all, h.dy.Ingresses...)
	}
	for _, ing := range append(all, h.objects.Ingresses...) {
		if slices.ContainsFunc(ing.Spec.Rules, func(r networkingv1.IngressRule) bool { return r.Host == host }) {
			return true
		}
	}
	return false
}

// TestDecideDynamoHandoverIngress: Dynamo's frontend Ingress (controlled by its DCD) is
// adopted in one update, the DGD as its controller in place of the DCD, with the UID and
// resourceVersion observed, our labels and our spec, before the DCDs are deleted (whose
// deletion has the garbage collector delete what they still control): the frontend's
// host has an Ingress at every state, ours is never created beside it, and it ends the
// DGD's, the same object. The transcript is testdata/dynamo-handover-ingress.golden.
func TestDecideDynamoHandoverIngress(t *testing.T) {
	h := ingressHandover(true)
	dgd := h.dgd
	var got []string
	adopted, released := -1, -1
	for range 30 {
		s := h.snapshot()
		said := h.pass(t)
		for _, l := range said {
			switch {
			case strings.HasPrefix(l, "UpdateObject Ingress g-frontend") && adopted < 0:
				adopted = len(got)
			case strings.HasPrefix(l, "ReleaseDynamo"):
				released = len(got)
			}
			got = append(got, l)
		}
		got = append(got, "--")
		h.serving(t, 2)
		if !h.exposed(ingressHost) {
			t.Fatalf("no Ingress routes %s after %v", ingressHost, said)
		}
		if h.dy == nil && s.Dynamo == nil && len(said) == 1 && isStableEnsure(said[0]) {
			break
		}
	}
	if h.dy != nil {
		t.Fatalf("the take-over did not end: %+v\n%s", h.dy, strings.Join(got, "\n"))
	}
	if adopted < 0 || released < 0 || adopted > released {
		t.Errorf("Ingress adopted at line %d, DCDs released at line %d: want the adoption first\n%s", adopted, released, strings.Join(got, "\n"))
	}
	if len(h.objects.Ingresses) != 1 {
		t.Fatalf("Ingresses %v, want Dynamo's, adopted", h.objects.Ingresses)
	}
	ing := h.objects.Ingresses[0]
	want := render.Component{DGD: dgd, Name: "Frontend", Spec: dgd.Spec.Services["Frontend"]}.Ingress("g-frontend", "g-frontend")
	switch {
	case ing.UID != "uid-ingress" || ing.ResourceVersion != "7":
		t.Errorf("adopted by an update of UID %s resourceVersion %s, want Dynamo's uid-ingress at 7", ing.UID, ing.ResourceVersion)
	case !metav1.IsControlledBy(&ing, h.dgd) || len(ing.OwnerReferences) != 1:
		t.Errorf("owners %+v, want the DGD alone as controller", ing.OwnerReferences)
	case ing.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue || ing.Labels[v1alpha1.LabelGraph] != "g":
		t.Errorf("labels %v, want ours", ing.Labels)
	case !equality.Semantic.DeepEqual(ing.Spec, want.Spec):
		t.Errorf("spec %+v, want what we render %+v", ing.Spec, want.Spec)
	}
	golden(t, "dynamo-handover-ingress", append(got, summary(h.dgd.Status)))
}

// TestDecideDynamoVirtualServiceHeld: Dynamo's VirtualService, which this operator
// does not render, holds the DCDs' deletion as an Ingress it does not render does; an
// Ingress of Dynamo's left without a controller (its DCD deleted with --cascade=orphan)
// is no DCD's to lose, and holds nothing.
func TestDecideDynamoVirtualServiceHeld(t *testing.T) {
	h := ingressHandover(true)
	h.dy.VirtualServices = []backends.ObjectRef{{Kind: "VirtualService", Name: "g-frontend", UID: "uid-vs"}}
	orphan := dynamoIngress(h.dgd)
	orphan.Name, orphan.OwnerReferences = "g-planner", nil
	h.dy.Ingresses = append(h.dy.Ingresses, orphan)
	var events []string
	for range 8 {
		said := h.pass(t)
		if slices.ContainsFunc(said, func(l string) bool { return strings.HasPrefix(l, "ReleaseDynamo") }) {
			t.Fatalf("DCDs released while Dynamo's VirtualService is theirs: %v", said)
		}
		for _, l := range said {
			if strings.HasPrefix(l, "Event "+v1alpha1.EventDynamoIngressHeld) {
				events = append(events, l)
			}
		}
	}
	if len(events) == 0 || !strings.Contains(events[0], "VirtualService g-frontend, which this operator does not render") || strings.Contains(events[0], "g-planner") {
		t.Fatalf("held Events %v: want one naming the VirtualService alone", events)
	}
	h.dy.VirtualServices = nil // its owner reference removed, or deleted
	if said := h.pass(t); !slices.ContainsFunc(said, func(l string) bool { return strings.HasPrefix(l, "ReleaseDynamo") }) {
		t.Errorf("the take-over does not end once the VirtualService is no DCD's: %v", said)
	}
}

// TestDecideDynamoIngressHeld: an Ingress of Dynamo's the DGD does not render (Dynamo's
// operator renders a frontend Ingress from its own configuration, GenerateDefaultIngressSpec,
// which no spec here says) holds the end of the take-over: once Dynamo's workloads are
// drained, the DCDs are not deleted (the garbage collector would delete the Ingress with
// them) and a Warning Event names it, pass after pass; once it is gone, the take-over
// ends.
func TestDecideDynamoIngressHeld(t *testing.T) {
	h := ingressHandover(false)
	held := 0
	for range 30 {
		said := h.pass(t)
		if slices.ContainsFunc(said, func(l string) bool { return strings.HasPrefix(l, "ReleaseDynamo") }) {
			t.Fatalf("DCDs released while Dynamo's Ingress is there: %v", said)
		}
		if slices.ContainsFunc(said, func(l string) bool {
			return strings.HasPrefix(l, "Event "+v1alpha1.EventDynamoIngressHeld) && strings.Contains(l, "Ingress g-frontend (host "+ingressHost+")")
		}) {
			held++
		}
		if held == 2 {
			break
		}
	}
	if held < 2 {
		t.Fatalf("no %s Event twice", v1alpha1.EventDynamoIngressHeld)
	}
	if !h.exposed(ingressHost) || h.dy == nil || len(h.dy.Components) == 0 {
		t.Fatalf("Dynamo's Ingress or DCDs gone while held: %+v", h.dy)
	}
	h.dy.Ingresses = nil // someone deletes it
	said := h.pass(t)
	if !slices.ContainsFunc(said, func(l string) bool { return strings.HasPrefix(l, "ReleaseDynamo") }) {
		t.Errorf("the take-over does not end once Dynamo's Ingress is gone: %v", said)
	}
}

// TestDecideDynamoIngressOtherName: Dynamo's Ingress under a name the DGD does not
// render one under, for the host the DGD's Ingress routes (our names are capped for a
// long DGD name, Dynamo's not): the safe order. Ours is created beside it in the first
// pass (its name is free), and Dynamo's is deleted only once ours is there (the cache
// shows it, so the API server admitted it), before the DCDs go: the host has an
// Ingress at every state.
func TestDecideDynamoIngressOtherName(t *testing.T) {
	h := ingressHandover(true)
	h.dy.Ingresses[0].Name = "g-frontend-dynamo"
	var got []string
	for range 30 {
		said := h.pass(t)
		got = append(got, said...)
		if !h.exposed(ingressHost) {
			t.Fatalf("no Ingress routes %s after %v", ingressHost, said)
		}
		if h.dy == nil {
			break
		}
	}
	created := slices.Index(got, "CreateObject Ingress g-frontend")
	deleted := slices.Index(got, "DeleteObject Ingress g-frontend-dynamo")
	released := slices.IndexFunc(got, func(l string) bool { return strings.HasPrefix(l, "ReleaseDynamo") })
	if created < 0 || deleted < created || released < deleted {
		t.Errorf("ours created at %d, Dynamo's deleted at %d, DCDs released at %d: want in that order\n%s", created, deleted, released, strings.Join(got, "\n"))
	}
	if len(h.objects.Ingresses) != 1 || h.objects.Ingresses[0].Name != "g-frontend" || (h.dy != nil && len(h.dy.Ingresses) > 0) {
		t.Errorf("Ingresses: ours %v, Dynamo's %v; want ours alone", h.objects.Ingresses, h.dy)
	}
}
