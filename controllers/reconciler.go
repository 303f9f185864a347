package controllers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/revisions"
	"github.com/dgd-rollout/operator/traffic"
)

// Reconciler reconciles DynamoGraphDeployments.
type Reconciler struct {
	Client client.Client
	// APIReader reads past the cache (Secrets, which the operator does not watch).
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	Backends  *backends.Registry
	History   revisions.Interface
	// Platform is the cluster's Dynamo platform pods are rendered for.
	Platform render.Config
	// Analysis runs the queries of analysis steps (nil: no Prometheus, every query
	// errs and an analysis is inconclusive).
	Analysis analysis.Querier
	// Providers are the traffic providers between cohorts, by traffic.Provider.Kind
	// (the Gateway API's only where its CRDs are served); Traffic is their
	// configuration.
	Providers map[string]traffic.Provider
	Traffic   traffic.Config
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// Middleware, when set, wraps the reconciler the controller runs: tests trace
	// passes with it (which DGDs are reconciled at once).
	Middleware func(reconcile.Reconciler) reconcile.Reconciler

	expected expectations
	// unscheduled shares each namespace's list of pods the scheduler could not place
	// among its DGDs (findUnschedulable).
	unscheduled unscheduledPods
	// statusRV remembers, per DGD, the operator's last status write (a written: see
	// fresh).
	statusRV sync.Map
	// specs remembers each DGD's render.Validate verdict (specchecks.go).
	specs specChecks
	// terminating holds the namespaces whose deletion refused a write (pass.go), and
	// quiet the refusals already logged (quiet.go).
	terminating sync.Map
	quiet       quietLog
	// sshKeys holds the SSH key Secrets (namespace/name) a create made or found
	// (execute.go createSSHKey): no pass reads a Secret.
	sshKeys sync.Map
	// runner runs the analysis queries off the pass (measure.go), made on first use.
	runner     *measurements
	runnerOnce sync.Once
}

// +kubebuilder:rbac:groups=nvidia.com,resources=dynamographdeployments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=nvidia.com,resources=dynamographdeployments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=nvidia.com,resources=dynamographdeployments/finalizers,verbs=update
// +kubebuilder:rbac:groups=nvidia.com,resources=analysistemplates;clusteranalysistemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// The platform objects a DGD renders besides its workloads (decide/platform.go) and
// what discovery reads (discovery.go):
// +kubebuilder:rbac:groups="",resources=services;serviceaccounts;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",resources=endpoints,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups=nvidia.com,resources=dynamoworkermetadatas,verbs=get;list;watch;create;update;patch;delete

// measurements is the reconciler's measurement runner, over r.Analysis.
func (r *Reconciler) measurements() *measurements {
	r.runnerOnce.Do(func() { r.runner = newMeasurements(r.Analysis, MaxQueries) })
	return r.runner
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
