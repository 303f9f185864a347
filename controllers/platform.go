package controllers

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/render"
)

// +kubebuilder:rbac:groups="",resources=services;serviceaccounts;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create
// +kubebuilder:rbac:groups="",resources=endpoints,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups=nvidia.com,resources=dynamoworkermetadatas,verbs=get;list;watch;create;update;patch;delete

// syncPlatform makes what a DGD's pods need before they start: under Kubernetes
// discovery the DGD's discovery service account, Role and RoleBinding; the namespace's
// planner service account and Role when the DGD has a planner; the wait-for-leader
// script of vLLM gangs and the SSH key of TRT-LLM gangs. The Roles grant exactly what
// Dynamo's do, which the operator holds itself (Kubernetes lets no one grant more).
func (p *pass) syncPlatform(ctx context.Context) error {
	if p.r.Platform.KubernetesDiscovery(p.dgd) {
		if err := p.applyRBAC(ctx, render.DiscoveryRBAC(p.dgd), true); err != nil {
			return err
		}
	}
	if err := p.plannerRBAC(ctx); err != nil {
		return err
	}
	if p.hasGang(render.FrameworkVLLM) {
		if err := p.apply(ctx, render.WaitLeaderScript(p.dgd), true, sameConfigMap); err != nil {
			return err
		}
	}
	if p.hasGang(render.FrameworkTRTLLM) && p.dgd.Annotations[render.AnnotationMPISSHSecret] == "" {
		return p.sshKey(ctx)
	}
	return nil
}

// hasGang reports whether a multinode worker runs framework.
func (p *pass) hasGang(framework string) bool {
	for _, name := range p.dgd.WorkerServiceNames() {
		svc := p.dgd.Spec.Services[name]
		if svc.IsMultinode() {
			if f, err := render.DetectFramework(svc.ExtraPodSpec.MainContainer, p.dgd.Spec.BackendFramework); err == nil && f == framework {
				return true
			}
		}
	}
	return false
}

// plannerRBAC keeps the namespace's planner service account, Role and RoleBinding,
// shared by every DGD of the namespace that has a planner: each such DGD is one of
// their owners (not their controller), so they go with the last of them.
func (p *pass) plannerRBAC(ctx context.Context) error {
	want := false
	for _, name := range p.dgd.ServiceNames() {
		want = want || p.dgd.Spec.Services[name].ComponentType == v1alpha1.ComponentTypePlanner
	}
	rbac := render.PlannerRBAC(p.dgd.Namespace)
	if !want {
		for _, o := range []client.Object{rbac.Binding, rbac.Role, rbac.ServiceAccount} {
			if err := p.disown(ctx, o); err != nil {
				return err
			}
		}
		return nil
	}
	return p.applyRBAC(ctx, rbac, false)
}

func (p *pass) applyRBAC(ctx context.Context, r render.RBAC, controller bool) error {
	if err := p.apply(ctx, r.ServiceAccount, controller, sameLabels); err != nil {
		return err
	}
	if err := p.apply(ctx, r.Role, controller, sameRole); err != nil {
		return err
	}
	return p.apply(ctx, r.Binding, controller, sameBinding)
}

// sshKey makes the DGD's SSH key Secret for TRT-LLM gangs once (read past the cache:
// the operator does not watch Secrets). It is owned by the DGD.
func (p *pass) sshKey(ctx context.Context) error {
	name := render.Component{DGD: p.dgd}.SSHSecret()
	var have corev1.Secret
	err := p.r.APIReader.Get(ctx, client.ObjectKey{Namespace: p.dgd.Namespace, Name: name}, &have)
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	s, err := render.NewSSHKeySecret(p.dgd.Namespace, name, map[string]string{v1alpha1.LabelGraph: p.dgd.Name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue})
	if err != nil {
		return err
	}
	if err := controllerutil.SetControllerReference(p.dgd, s, p.r.Scheme); err != nil {
		return err
	}
	if err := p.r.Client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Secret %s/%s: %w", s.Namespace, name, err)
	}
	p.objects = append(p.objects, "created Secret "+name)
	return nil
}

// syncServices keeps a Service per component that gets one (render.WantsService): a
// stable service's `{dgd}-{service}` for as long as the service exists, a worker
// revision's discovery Service (backends.DiscoveryServiceName, never a name LWS or
// Grove creates a Service under) for as long as the revision has workloads (this
// pass's result), selecting only leaders on a LeaderWorkerSet; and an Ingress per
// service that enables one. Others of the DGD go; a revision's discovery Service under
// its name of before (its LeaderWorkerSet's) only once the new one publishes as many
// ready endpoints. Two wanted objects of one name (a service named like another's
// generated name) are a name conflict, never one silently replacing the other.
func (p *pass) syncServices(ctx context.Context) error {
	want := map[string]client.Object{}
	add := func(key string, o client.Object) {
		if _, dup := want[key]; dup {
			p.conflict(&backends.NameConflictError{Kind: p.kindOf(o), Namespace: o.GetNamespace(), Name: o.GetName(),
				Owner: "another object this DynamoGraphDeployment needs under the same name", DGD: p.dgd.Name})
			return
		}
		want[key] = o
	}
	for _, name := range p.dgd.ServiceNames() {
		svc := p.dgd.Spec.Services[name]
		if svc.IsWorker() {
			continue
		}
		c := render.Component{DGD: p.dgd, Name: name, Spec: svc, Config: p.r.Platform}
		sname := render.ServiceName(p.dgd.Name, name, "", backends.WorkloadName)
		if c.WantsService() {
			add("Service/"+sname, c.Service(sname, false))
		}
		if ing := c.Ingress(sname, sname); ing != nil {
			add("Ingress/"+sname, ing)
		}
	}
	legacy := map[string]string{} // discovery Service name of before -> now
	for _, w := range p.result {
		if w.Hash == "" || w.Terminating {
			continue
		}
		spec := p.templateOf(w.Service, w.Hash)
		if spec == nil || !spec.IsWorker() {
			continue
		}
		c := render.Component{DGD: p.dgd, Name: w.Service, Spec: spec, Hash: w.Hash, Config: p.r.Platform}
		if !c.WantsService() {
			continue
		}
		sname := backends.DiscoveryServiceName(p.dgd.Name, w.Service, w.Hash)
		add("Service/"+sname, c.Service(sname, w.Kind == "LeaderWorkerSet" && spec.IsMultinode()))
		legacy[render.ServiceName(p.dgd.Name, w.Service, w.Hash, backends.WorkloadName)] = sname
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch o := want[k].(type) {
		case *corev1.Service:
			if err := p.apply(ctx, o, true, sameService); err != nil {
				return err
			}
		case *networkingv1.Ingress:
			if err := p.apply(ctx, o, true, sameIngress); err != nil {
				return err
			}
		}
	}
	return p.pruneServices(ctx, want, legacy)
}

// templateOf is a worker service's template at a revision: the spec's for the update
// revision, the revision's record for an old one (its Service is what it was made
// with), else the spec's.
func (p *pass) templateOf(service, hash string) *v1alpha1.DynamoComponentDeploymentSharedSpec {
	if hash != p.updateHash() {
		if s := p.revs.ServiceAt(hash, service); s != nil {
			return s
		}
	}
	return p.dgd.Spec.Services[service]
}

// pruneServices deletes the DGD's Services and Ingresses that are not wanted, but a
// revision's discovery Service named as before (legacy: old name -> new) while its
// replacement publishes fewer ready endpoints.
func (p *pass) pruneServices(ctx context.Context, want map[string]client.Object, legacy map[string]string) error {
	var svcs corev1.ServiceList
	if err := backends.ListControlled(ctx, p.r.Client, &svcs, p.dgd); err != nil {
		return fmt.Errorf("listing Services of %s/%s: %w", p.dgd.Namespace, p.dgd.Name, err)
	}
	var ings networkingv1.IngressList
	if err := backends.ListControlled(ctx, p.r.Client, &ings, p.dgd); err != nil {
		return fmt.Errorf("listing Ingresses of %s/%s: %w", p.dgd.Namespace, p.dgd.Name, err)
	}
	byName := map[string]*corev1.Service{}
	for i := range svcs.Items {
		byName[svcs.Items[i].Name] = &svcs.Items[i]
	}
	var doomed []client.Object
	for i := range svcs.Items {
		name := svcs.Items[i].Name
		if _, ok := want["Service/"+name]; ok || !metav1.IsControlledBy(&svcs.Items[i], p.dgd) {
			continue
		}
		if now, ok := legacy[name]; ok && p.r.Platform.KubernetesDiscovery(p.dgd) && !p.routableAsBefore(byName[now], &svcs.Items[i]) {
			continue
		}
		doomed = append(doomed, &svcs.Items[i])
	}
	for i := range ings.Items {
		if _, ok := want["Ingress/"+ings.Items[i].Name]; !ok && metav1.IsControlledBy(&ings.Items[i], p.dgd) {
			doomed = append(doomed, &ings.Items[i])
		}
	}
	for _, o := range doomed {
		if err := backends.DeleteObject(ctx, p.r.Client, o, p.kindOf(o)); err != nil {
			return err
		}
		p.objects = append(p.objects, fmt.Sprintf("deleted %s %s", p.kindOf(o), o.GetName()))
		if err := p.releaseSubdomain(ctx, o.GetName()); err != nil {
			return err
		}
	}
	return nil
}

// releaseSubdomain tells the controller of the DGD's workload named name, if any, that
// the Service of that name (ours, deleted) is gone, so it creates its own.
func (p *pass) releaseSubdomain(ctx context.Context, name string) error {
	for _, w := range p.workloads {
		if r, ok := w.backend.(backends.SubdomainReleaser); ok && w.Name == name && !w.Terminating {
			return r.ReleaseSubdomain(ctx, p.dgd, name)
		}
	}
	return nil
}

// kindOf names an object's kind for messages.
func (p *pass) kindOf(o client.Object) string {
	if gvk, err := apiutil.GVKForObject(o, p.r.Scheme); err == nil {
		return gvk.Kind
	}
	return fmt.Sprintf("%T", o)
}

// apply creates want, or updates the existing object when same reports a difference
// (no write when nothing differs). The DGD is want's controller, or one of its owners.
func (p *pass) apply(ctx context.Context, want client.Object, controller bool, same func(have, want client.Object) bool) error {
	if controller {
		if err := controllerutil.SetControllerReference(p.dgd, want, p.r.Scheme); err != nil {
			return err
		}
	} else if err := controllerutil.SetOwnerReference(p.dgd, want, p.r.Scheme); err != nil {
		return err
	}
	have := want.DeepCopyObject().(client.Object)
	err := p.r.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
	kind := p.kindOf(want)
	switch {
	case apierrors.IsNotFound(err):
		if err := p.r.Client.Create(ctx, want); apierrors.IsAlreadyExists(err) {
			return p.alreadyExists(ctx, want, controller, kind)
		} else if err != nil {
			return fmt.Errorf("creating %s %s/%s: %w", kind, want.GetNamespace(), want.GetName(), err)
		}
		p.objects = append(p.objects, fmt.Sprintf("created %s %s", kind, want.GetName()))
		return nil
	case err != nil:
		return fmt.Errorf("getting %s %s/%s: %w", kind, want.GetNamespace(), want.GetName(), err)
	case controller && !metav1.IsControlledBy(have, p.dgd):
		p.conflict(backends.NotControlled(kind, have, p.dgd))
		return nil
	}
	owned := hasOwner(have, p.dgd)
	if same(have, want) && owned {
		return nil
	}
	if !owned {
		have.SetOwnerReferences(append(have.GetOwnerReferences(), want.GetOwnerReferences()...))
	}
	copyInto(have, want)
	if err := p.r.Client.Update(ctx, have); err != nil {
		return fmt.Errorf("updating %s %s/%s: %w", kind, have.GetNamespace(), have.GetName(), err)
	}
	return nil
}

// alreadyExists judges a create of want that the API server refused with
// AlreadyExists while the cache showed no such object: it is never taken as success
// unread. The object is read from the API server: the DGD's own (an earlier pass's
// create the cache does not show yet) is fine, as is any object the DGD is only one of
// the owners of (the next pass adds it); someone else's is a name conflict, reported
// and left alone (issue 22: LWS's headless Service taken as our discovery Service).
func (p *pass) alreadyExists(ctx context.Context, want client.Object, controller bool, kind string) error {
	if p.r.APIReader == nil {
		return fmt.Errorf("creating %s %s/%s: it exists, and the cache does not show it yet", kind, want.GetNamespace(), want.GetName())
	}
	have := want.DeepCopyObject().(client.Object)
	if err := p.r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), have); err != nil {
		return fmt.Errorf("creating %s %s/%s: it exists, but reading it: %w", kind, want.GetNamespace(), want.GetName(), err)
	}
	if controller && !metav1.IsControlledBy(have, p.dgd) {
		p.conflict(backends.NotControlled(kind, have, p.dgd))
	}
	return nil
}

// conflict records an object the DGD needs that is someone else's: the pass goes on
// without it (nothing is adopted, changed or deleted), and its status says so
// (fillConditions: Ready False, Stalled True, reason NameConflict).
func (p *pass) conflict(e *backends.NameConflictError) {
	p.conflicts = append(p.conflicts, e.Error())
	p.requeueIn(conflictRecheck)
}

// conflictRecheck is how often a DGD with a name conflict looks again: the object in
// its way is none of its own, so no event of its watches says when it is gone.
const conflictRecheck = 30 * time.Second

// disown removes the DGD from o's owners (the object goes with its last owner).
func (p *pass) disown(ctx context.Context, o client.Object) error {
	if err := p.r.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !hasOwner(o, p.dgd) {
		return nil
	}
	var refs []metav1.OwnerReference
	for _, r := range o.GetOwnerReferences() {
		if r.UID != p.dgd.UID {
			refs = append(refs, r)
		}
	}
	if len(refs) == 0 {
		return backends.DeleteObject(ctx, p.r.Client, o, p.kindOf(o))
	}
	o.SetOwnerReferences(refs)
	return p.r.Client.Update(ctx, o)
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
