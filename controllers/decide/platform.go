package decide

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/render"
)

// Lookup is an object of a fixed name the DGD may need, which the snapshot holds as
// the cache shows it (Objects.Named[Key]); Live ones are read from the API server (the
// operator does not cache Secrets).
type Lookup struct {
	Object client.Object
	Live   bool
}

// Key is the Lookup's key in Objects.Named: "Kind/name".
func (l Lookup) Key() string { return lookupKey(l.Object) }

func lookupKey(o client.Object) string { return kindOf(o) + "/" + o.GetName() }

// Lookups are the objects of fixed names the DGD's pods may need (a pure function of
// the spec): its discovery ServiceAccount, Role and RoleBinding, the namespace's planner
// ServiceAccount, Role and RoleBinding (kept or disowned), and the wait-for-leader
// script of vLLM gangs. The SSH key Secret of TRT-LLM gangs is not read (the operator
// may not read Secrets: issue 38): Snapshot.SSHKeys says which it made.
func Lookups(dgd *v1alpha1.DynamoGraphDeployment) []Lookup {
	var out []Lookup
	for _, r := range []render.RBAC{render.DiscoveryRBAC(dgd), render.PlannerRBAC(dgd.Namespace)} {
		out = append(out, Lookup{Object: r.ServiceAccount}, Lookup{Object: r.Role}, Lookup{Object: r.Binding})
	}
	return append(out, Lookup{Object: render.WaitLeaderScript(dgd)})
}

// wantsSSHKey: the DGD has a TRT-LLM gang and names no SSH key Secret of its own.
func wantsSSHKey(dgd *v1alpha1.DynamoGraphDeployment) bool {
	return hasGang(dgd, render.FrameworkTRTLLM) && dgd.Annotations[render.AnnotationMPISSHSecret] == ""
}

// platform decides the objects a DGD's pods need before they start: under Kubernetes
// discovery the DGD's discovery ServiceAccount, Role and RoleBinding; the namespace's
// planner ServiceAccount and Role when the DGD has a planner (disowned when it has
// none); the wait-for-leader script of vLLM gangs and the SSH key of TRT-LLM gangs.
// The Roles grant exactly what Dynamo's do, which the operator holds itself
// (Kubernetes lets no one grant more).
func platform(v *view, d *draft) {
	if v.Platform.KubernetesDiscovery(v.dgd) {
		applyRBAC(v, d, render.DiscoveryRBAC(v.dgd), true)
	}
	plannerRBAC(v, d)
	if hasGang(v.dgd, render.FrameworkVLLM) {
		cm := render.WaitLeaderScript(v.dgd)
		apply(v.dgd, d, cm, v.named(cm), true, sameConfigMap)
	}
	if wantsSSHKey(v.dgd) {
		name := render.Component{DGD: v.dgd}.SSHSecret()
		if !v.SSHKeys[name] { // made by a create, or found by one answered AlreadyExists
			s := &corev1.Secret{}
			s.Namespace, s.Name = v.dgd.Namespace, name
			s.Labels = map[string]string{v1alpha1.LabelGraph: v.dgd.Name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
			owned(v.dgd, s, true)
			d.write(Write{Op: CreateSSHKey, Object: s, Kind: "Secret", Controller: true, Say: []string{"created Secret " + name}})
		}
	}
}

// named is the object of want's kind and name as the snapshot holds it, or nil.
func (v *view) named(want client.Object) client.Object {
	return v.Objects.Named[lookupKey(want)]
}

// plannerRBAC keeps the namespace's planner service account, Role and RoleBinding,
// shared by every DGD of the namespace that has a planner: each such DGD is one of
// their owners (not their controller), so they go with the last of them.
func plannerRBAC(v *view, d *draft) {
	want := false
	for _, name := range v.dgd.ServiceNames() {
		want = want || v.dgd.Spec.Services[name].ComponentType == v1alpha1.ComponentTypePlanner
	}
	rbac := render.PlannerRBAC(v.dgd.Namespace)
	if want {
		applyRBAC(v, d, rbac, false)
		return
	}
	for _, o := range []client.Object{rbac.Binding, rbac.Role, rbac.ServiceAccount} {
		disown(v.dgd, d, v.named(o))
	}
}

func applyRBAC(v *view, d *draft, r render.RBAC, controller bool) {
	apply(v.dgd, d, r.ServiceAccount, v.named(r.ServiceAccount), controller, sameLabels)
	apply(v.dgd, d, r.Role, v.named(r.Role), controller, sameRole)
	apply(v.dgd, d, r.Binding, v.named(r.Binding), controller, sameBinding)
}
