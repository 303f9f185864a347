package backends

import (
	"fmt"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// Registry maps a DGD's spec.backend to the Backend that runs each service. Backends
// are registered explicitly by the manager (cmd/manager), not by init functions.
type Registry struct {
	byType map[v1alpha1.BackendType]Backend
	order  []Backend
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{byType: map[v1alpha1.BackendType]Backend{}} }

// Register makes b the backend for t. Registering Auto is not allowed: Auto resolves to
// Deployment or LeaderWorkerSet per service.
func (r *Registry) Register(t v1alpha1.BackendType, b Backend) *Registry {
	if t == v1alpha1.BackendAuto {
		panic("backends: Auto is resolved per service and cannot be registered")
	}
	r.byType[t] = b
	r.order = append(r.order, b)
	return r
}

// All returns every registered backend in registration order.
func (r *Registry) All() []Backend { return r.order }

// Descriptions are the registered backends' descriptions by the spec.backend value that
// selects them: what Choose decides from.
func (r *Registry) Descriptions() map[v1alpha1.BackendType]Description {
	out := make(map[v1alpha1.BackendType]Description, len(r.byType))
	for t, b := range r.byType {
		out[t] = b.Describe()
	}
	return out
}

// ByKind returns the registered backend whose workload kind is kind, or nil.
func (r *Registry) ByKind(kind string) Backend {
	for _, b := range r.order {
		if b.Describe().Kind == kind {
			return b
		}
	}
	return nil
}

// For returns the backend that runs service svc of dgd (see Choose).
func (r *Registry) For(dgd *v1alpha1.DynamoGraphDeployment, svc *v1alpha1.DynamoComponentDeploymentSharedSpec) (Backend, error) {
	t := typeFor(dgd, svc)
	b, ok := r.byType[t]
	if !ok {
		return nil, &UnavailableError{Backend: t}
	}
	return b, nil
}

// Choose returns the description of the backend that runs service svc of dgd among
// those available: spec.backend, or for Auto, LeaderWorkerSet when the service is
// multinode and Deployment otherwise.
func Choose(available map[v1alpha1.BackendType]Description, dgd *v1alpha1.DynamoGraphDeployment,
	svc *v1alpha1.DynamoComponentDeploymentSharedSpec) (Description, error) {
	t := typeFor(dgd, svc)
	d, ok := available[t]
	if !ok {
		return Description{}, &UnavailableError{Backend: t}
	}
	return d, nil
}

func typeFor(dgd *v1alpha1.DynamoGraphDeployment, svc *v1alpha1.DynamoComponentDeploymentSharedSpec) v1alpha1.BackendType {
	t := dgd.BackendOrDefault()
	if t == v1alpha1.BackendAuto {
		t = v1alpha1.BackendDeployment
		if svc.IsMultinode() {
			t = v1alpha1.BackendLeaderWorkerSet
		}
	}
	return t
}

// UnavailableError says that a DGD asks for a backend this operator does not run (not
// built in, or its CRDs are not installed). It is permanent until the spec changes.
type UnavailableError struct{ Backend v1alpha1.BackendType }

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("backend %s is not available in this operator", e.Backend)
}
