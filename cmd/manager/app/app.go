// Package app wires the operator: the scheme, the manager options and the registered
// backends. cmd/manager, `make run` (hack/localrun) and the test suites share it, so
// they run exactly the operator that ships.
package app

import (
	"fmt"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/deployment"
	"github.com/dgd-rollout/operator/backends/grove"
	"github.com/dgd-rollout/operator/backends/lws"
	"github.com/dgd-rollout/operator/controllers"
	"github.com/dgd-rollout/operator/revisions"
)

// NewScheme returns a scheme with every type the operator reads or writes.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err) // static registration; cannot fail
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := lwsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := grovev1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// CacheOptions caches only the pods of DGDs: a cluster's other pods are none of ours.
func CacheOptions() cache.Options {
	ofDGD, err := labels.NewRequirement(v1alpha1.LabelGraph, selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: labels.NewSelector().Add(*ofDGD)},
	}}
}

// Backends registers every backend this build runs, explicitly. A backend whose CRD is
// not installed in the cluster is left out (watching it would stop the manager from
// starting); DGDs that need it report InvalidSpec: backend not available.
func Backends(mgr ctrl.Manager) *backends.Registry {
	r := backends.NewRegistry().
		Register(v1alpha1.BackendDeployment, deployment.New(mgr.GetClient(), mgr.GetScheme()))
	if installed(mgr, lwsv1.SchemeGroupVersion.WithKind("LeaderWorkerSet")) {
		r.Register(v1alpha1.BackendLeaderWorkerSet, lws.New(mgr.GetClient(), mgr.GetScheme()))
	} else {
		ctrl.Log.Info("LeaderWorkerSet CRD not installed: the LeaderWorkerSet backend is off")
	}
	if installed(mgr, grovev1.SchemeGroupVersion.WithKind("PodCliqueSet")) {
		r.Register(v1alpha1.BackendGrove, grove.New(mgr.GetClient(), mgr.GetScheme()))
	} else {
		ctrl.Log.Info("Grove CRDs not installed: the Grove backend is off")
	}
	return r
}

func installed(mgr ctrl.Manager, gvk schema.GroupVersionKind) bool {
	_, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil
}

// NewManager makes the operator's manager as cmd/manager runs it: opts with this
// scheme and cache, and the controller set up. Tests, benchmarks and make run use it
// too, so they run what the binary runs.
func NewManager(cfg *rest.Config, opts ctrl.Options) (ctrl.Manager, error) {
	opts.Scheme, opts.Cache = NewScheme(), CacheOptions()
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := Setup(mgr); err != nil {
		return nil, err
	}
	return mgr, nil
}

// Setup adds the DynamoGraphDeployment controller to mgr.
func Setup(mgr ctrl.Manager) error {
	r := &controllers.Reconciler{
		Client:   mgr.GetClient(),
		Scheme:   mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("dgd-rollout"),
		Backends: Backends(mgr),
		History:  revisions.NewHistory(mgr.GetClient(), mgr.GetScheme()),
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the DynamoGraphDeployment controller: %w", err)
	}
	return nil
}
