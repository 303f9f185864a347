package harness

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/cmd/manager/app"
)

// The fake EndpointSlice controller below plays kube-controller-manager's (envtest runs
// none), read from k8s.io/kubernetes v1.36.2 pkg/controller/endpointslice
// (endpointslice_controller.go syncService) and k8s.io/endpointslice v0.36.2
// (reconciler.go Reconcile/reconcileByAddressType, utils.go podToEndpoint,
// setEndpointSliceLabels, newEndpointSlice; util/controller_utils.go
// ShouldPodBeInEndpoints, FindPort):
//
//   - every Service with a selector gets EndpointSlices of address type IPv4 (a
//     single-stack cluster) holding one endpoint per selected pod of its namespace that
//     is not terminal (Succeeded, Failed) and has an IP, terminating pods included;
//     a Service with no such pod has one placeholder slice without endpoints;
//   - an endpoint's conditions: serving = the pod is Ready, terminating = it has a
//     deletionTimestamp, ready = publishNotReadyAddresses || (serving && !terminating);
//     its targetRef names the pod (name, namespace, uid), nodeName is the pod's, and
//     hostname is set when the pod's hostname is set and its subdomain is the Service;
//   - ports: each Service port whose targetPort the pod's containers name (or a
//     number); endpoints with different port sets go to different slices; a headless
//     Service without ports has slices without ports;
//   - labels: the Service's, but the reserved ones, plus kubernetes.io/service-name,
//     endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io and, for a
//     headless Service, service.kubernetes.io/headless; the Service controls its slices.
//
// It also plays the garbage collector for them: the slices of a deleted Service go.
// Not modelled: the 100-endpoint split of a slice, topology hints, zones, IPv6, and the
// slice names (the real controller uses generateName `<service>-`; these are
// `<service>-<port set hash>`, so that a write this fake's cache has not shown yet is
// never made twice). Nothing reads slice names: consumers select slices by label.
//
// In a real cluster the controller follows a pod's change within milliseconds; so
// does this one (a watch of pods and Services, one sync per changed namespace).

// endpointSliceManagedBy is the real controller's managed-by value.
const endpointSliceManagedBy = "endpointslice-controller.k8s.io"

// PauseEndpointSlices makes the fake EndpointSlice controller leave namespace ns alone
// until ResumeEndpointSlices: a test of what the operator does while a slice it waits
// for has not been written.
func (e *Env) PauseEndpointSlices(ns string) { e.slicesPaused.Store(ns, true) }

// ResumeEndpointSlices undoes PauseEndpointSlices.
func (e *Env) ResumeEndpointSlices(ns string) {
	e.slicesPaused.Delete(ns)
	if f := e.slices; f != nil {
		f.mark(ns)
	}
}

// StartEndpointSlices runs the fake EndpointSlice controller over every namespace until
// the returned stop is called.
func (e *Env) StartEndpointSlices(ctx context.Context) (stop func(), err error) {
	c, err := cache.New(e.Config, cache.Options{Scheme: app.NewScheme()})
	if err != nil {
		return nil, err
	}
	f := &fakeEndpointSlices{e: e, c: c, dirty: map[string]bool{}, kick: make(chan struct{}, 1)}
	e.slices = f
	for _, obj := range []client.Object{&corev1.Pod{}, &corev1.Service{}, &discoveryv1.EndpointSlice{}} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, err
		}
		mark := func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if m, ok := o.(metav1.Object); ok {
				f.mark(m.GetNamespace())
			}
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: mark, UpdateFunc: func(_, o any) { mark(o) }, DeleteFunc: mark,
		}); err != nil {
			return nil, err
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() { _ = c.Start(cctx) }()
	if !c.WaitForCacheSync(cctx) {
		cancel()
		return nil, fmt.Errorf("fake EndpointSlice controller: cache did not sync")
	}
	done := make(chan struct{})
	go func() { defer close(done); f.run(cctx) }()
	return func() { cancel(); <-done }, nil
}

type fakeEndpointSlices struct {
	e     *Env
	c     cache.Cache
	mu    sync.Mutex
	dirty map[string]bool
	kick  chan struct{}
}

func (f *fakeEndpointSlices) mark(ns string) {
	f.mu.Lock()
	f.dirty[ns] = true
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

func (f *fakeEndpointSlices) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.kick:
		}
		f.mu.Lock()
		dirty := f.dirty
		f.dirty = map[string]bool{}
		f.mu.Unlock()
		for ns := range dirty {
			if _, paused := f.e.slicesPaused.Load(ns); paused {
				continue
			}
			if err := f.sync(ctx, ns); err != nil && ctx.Err() == nil {
				f.mark(ns) // a conflict or a cache behind our write: look again
			}
		}
	}
}

// sync reconciles every Service of one namespace (syncService).
func (f *fakeEndpointSlices) sync(ctx context.Context, ns string) error {
	var svcs corev1.ServiceList
	var pods corev1.PodList
	var slices discoveryv1.EndpointSliceList
	for _, l := range []client.ObjectList{&svcs, &pods, &slices} {
		if err := f.c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return err
		}
	}
	bySvc := map[string][]*discoveryv1.EndpointSlice{}
	for i := range slices.Items {
		s := &slices.Items[i]
		if s.Labels[discoveryv1.LabelManagedBy] == endpointSliceManagedBy {
			bySvc[s.Labels[discoveryv1.LabelServiceName]] = append(bySvc[s.Labels[discoveryv1.LabelServiceName]], s)
		}
	}
	var errs []string
	live := map[string]bool{}
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		if len(svc.Spec.Selector) == 0 || !svc.DeletionTimestamp.IsZero() {
			continue
		}
		live[svc.Name] = true
		if err := f.reconcile(ctx, svc, pods.Items, bySvc[svc.Name]); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for name, ss := range bySvc {
		if live[name] {
			continue
		}
		for _, s := range ss { // the garbage collector: their Service is gone
			if err := f.e.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err.Error())
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("fake EndpointSlice controller: %s", strings.Join(errs, "; "))
	}
	return nil
}

// reconcile makes svc's slices hold exactly its pods' endpoints (Reconcile).
func (f *fakeEndpointSlices) reconcile(ctx context.Context, svc *corev1.Service, pods []corev1.Pod, have []*discoveryv1.EndpointSlice) error {
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	want := map[string]*discoveryv1.EndpointSlice{} // by port set
	for i := range pods {
		p := &pods[i]
		if !sel.Matches(labels.Set(p.Labels)) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.Status.PodIP == "" {
			continue
		}
		ports := endpointPorts(svc, p)
		key := portKey(ports)
		s := want[key]
		if s == nil {
			s = newSlice(svc, ports)
			want[key] = s
		}
		s.Endpoints = append(s.Endpoints, podToEndpoint(p, svc))
	}
	if len(want) == 0 {
		s := newSlice(svc, []discoveryv1.EndpointPort{})
		want[portKey(s.Ports)] = s
	}
	current := map[string]*discoveryv1.EndpointSlice{}
	for _, s := range have {
		current[s.Name] = s
	}
	for _, s := range want {
		sort.Slice(s.Endpoints, func(i, j int) bool { return s.Endpoints[i].TargetRef.Name < s.Endpoints[j].TargetRef.Name })
		cur, ok := current[s.Name]
		delete(current, s.Name)
		switch {
		case !ok:
			if err := f.e.Client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		case !equality.Semantic.DeepEqual(cur.Endpoints, s.Endpoints) || !equality.Semantic.DeepEqual(cur.Ports, s.Ports) || !maps.Equal(cur.Labels, s.Labels):
			upd := cur.DeepCopy()
			upd.Endpoints, upd.Ports, upd.Labels = s.Endpoints, s.Ports, s.Labels
			if err := f.e.Client.Update(ctx, upd); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	for _, s := range current { // a port set no pod has any more
		if err := f.e.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// newSlice is newEndpointSlice: the Service's labels (setEndpointSliceLabels), owned by
// the Service.
func newSlice(svc *corev1.Service, ports []discoveryv1.EndpointPort) *discoveryv1.EndpointSlice {
	l := map[string]string{}
	for k, v := range svc.Labels {
		if k != discoveryv1.LabelServiceName && k != discoveryv1.LabelManagedBy && k != corev1.IsHeadlessService {
			l[k] = v
		}
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		l[corev1.IsHeadlessService] = ""
	}
	l[discoveryv1.LabelServiceName] = svc.Name
	l[discoveryv1.LabelManagedBy] = endpointSliceManagedBy
	h := fnv.New32a()
	_, _ = h.Write([]byte(portKey(ports)))
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: fmt.Sprintf("%s-%05x", svc.Name, h.Sum32()&0xfffff), Labels: l,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, corev1.SchemeGroupVersion.WithKind("Service"))}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       ports,
	}
}

// podToEndpoint is the real controller's.
func podToEndpoint(p *corev1.Pod, svc *corev1.Service) discoveryv1.Endpoint {
	serving := podReady(p)
	terminating := p.DeletionTimestamp != nil
	ready := svc.Spec.PublishNotReadyAddresses || serving && !terminating
	ep := discoveryv1.Endpoint{
		Addresses:  []string{p.Status.PodIP},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
	}
	if p.Spec.NodeName != "" {
		ep.NodeName = ptr.To(p.Spec.NodeName)
	}
	if p.Spec.Hostname != "" && p.Spec.Subdomain == svc.Name {
		ep.Hostname = ptr.To(p.Spec.Hostname)
	}
	return ep
}

// endpointPorts is getEndpointPorts: a Service port the pod cannot serve is left out.
func endpointPorts(svc *corev1.Service, p *corev1.Pod) []discoveryv1.EndpointPort {
	out := []discoveryv1.EndpointPort{}
	if len(svc.Spec.Ports) == 0 && svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return out
	}
	for _, sp := range svc.Spec.Ports {
		n := 0
		switch sp.TargetPort.Type {
		case intstr.Int:
			n = sp.TargetPort.IntValue()
		case intstr.String:
			for _, c := range p.Spec.Containers {
				for _, cp := range c.Ports {
					if cp.Name == sp.TargetPort.StrVal && cp.Protocol == sp.Protocol {
						n = int(cp.ContainerPort)
					}
				}
			}
		}
		if n == 0 {
			continue
		}
		out = append(out, discoveryv1.EndpointPort{Name: ptr.To(sp.Name), Port: ptr.To(int32(n)), Protocol: ptr.To(sp.Protocol), AppProtocol: sp.AppProtocol})
	}
	return out
}

func portKey(ports []discoveryv1.EndpointPort) string {
	var parts []string
	for _, p := range ports {
		parts = append(parts, fmt.Sprintf("%s/%d/%s", ptr.Deref(p.Name, ""), ptr.Deref(p.Port, 0), ptr.Deref(p.Protocol, "")))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
