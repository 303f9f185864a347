package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// RolloutSteps counts the reconcile passes that moved worker replicas, per DGD. It is
// served on the manager's metrics endpoint as dgd_rollout_steps_total.
var RolloutSteps = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "dgd_rollout_steps_total",
	Help: "Reconcile passes that scaled, created or deleted worker workloads of a DynamoGraphDeployment.",
}, []string{"namespace", "name"})

func init() {
	ctrlmetrics.Registry.MustRegister(RolloutSteps)
}
