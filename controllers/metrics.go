package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// Prometheus metrics of the operator, registered with controller-runtime's registry and
// so served on the manager's metrics endpoint (--metrics-bind-address, default :8080,
// path /metrics) next to controller-runtime's own controller_runtime_* and workqueue_*
// series. Per-DGD series carry the labels namespace and name; ForgetDGD deletes them
// when the DGD is deleted.

// RolloutSteps counts the reconcile passes that moved worker replicas, per DGD. It is
// served on the manager's metrics endpoint as dgd_rollout_steps_total.
var RolloutSteps = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "dgd_rollout_steps_total",
	Help: "Reconcile passes that scaled, created or deleted worker workloads of a DynamoGraphDeployment.",
}, []string{"namespace", "name"})

// RolloutPhase is 1 for the rollout phase a DGD is in and 0 for the other phases, as
// dgd_rollout_phase{namespace, name, phase}; phase is one of rolloutPhases. Set it with
// ObservePhase.
var RolloutPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "dgd_rollout_phase",
	Help: "Rollout phase of a DynamoGraphDeployment (status.rollingUpdate.phase): 1 for the current phase, 0 for the others.",
}, []string{"namespace", "name", "phase"})

// RolloutDuration observes how long worker rollouts take, from status.rollingUpdate.startTime
// to endTime, as dgd_rollout_duration_seconds. It has no per-DGD labels (a histogram
// per DGD would multiply series by the bucket count); the buckets run from 1 s to about
// 4.5 h. Observe with ObserveRolloutDuration.
var RolloutDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name:    "dgd_rollout_duration_seconds",
	Help:    "Time from the start of a DynamoGraphDeployment worker rollout to its completion.",
	Buckets: prometheus.ExponentialBuckets(1, 2, 15), // 1 s .. 16384 s
})

// RevisionsKept is the number of worker revisions (ControllerRevisions) a DGD keeps, as
// dgd_revisions_kept{namespace, name}. Set it with ObserveRevisionsKept.
var RevisionsKept = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "dgd_revisions_kept",
	Help: "Revisions (ControllerRevisions, each recording the whole graph) a DynamoGraphDeployment keeps in its history.",
}, []string{"namespace", "name"})

// ReconcileErrors counts reconcile passes of a DGD that returned an error (and so were
// retried with backoff), as dgd_reconcile_errors_total{namespace, name}. Count with
// ObserveReconcileError.
var ReconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "dgd_reconcile_errors_total",
	Help: "Reconcile passes of a DynamoGraphDeployment that ended in an error.",
}, []string{"namespace", "name"})

// StaleReads counts passes that found the cached DGD a status write behind the
// operator's own and read it from the API server instead, as dgd_stale_cache_reads_total.
var StaleReads = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "dgd_stale_cache_reads_total",
	Help: "Passes whose cached DynamoGraphDeployment predated the operator's last status write, read from the API server instead.",
})

// AnalysisMeasurements counts the measurements of analysis steps per DGD and outcome
// (Successful, Failed, Inconclusive, Error), as
// dgd_analysis_measurements_total{namespace, name, phase}.
var AnalysisMeasurements = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "dgd_analysis_measurements_total",
	Help: "Measurements (Prometheus queries) of the analysis steps of a DynamoGraphDeployment's rollouts, by outcome.",
}, []string{"namespace", "name", "phase"})

// RolloutCurrentStep is the step of spec.rollout.steps a DGD's rollout is at, 1-based
// as messages and the plugin count (status.rollingUpdate.currentStepIndex + 1), or -1
// when it is at none (no steps, or they are done), as
// dgd_rollout_current_step{namespace, name}. ObserveStatus sets it.
var RolloutCurrentStep = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "dgd_rollout_current_step",
	Help: "Step of spec.rollout.steps a DynamoGraphDeployment's rollout is at, 1-based; -1 when none (no steps, or every step done).",
}, []string{"namespace", "name"})

// rolloutPhases are the values of the phase label of dgd_rollout_phase.
var rolloutPhases = []v1alpha1.RolloutPhase{
	v1alpha1.RolloutPending, v1alpha1.RolloutInProgress, v1alpha1.RolloutPaused,
	v1alpha1.RolloutCompleted, v1alpha1.RolloutFailed, v1alpha1.RolloutAborted,
}

func init() {
	ctrlmetrics.Registry.MustRegister(RolloutSteps, RolloutPhase, RolloutCurrentStep, RolloutDuration, RevisionsKept, ReconcileErrors, StaleReads, AnalysisMeasurements)
}

// ObservePhase sets dgd_rollout_phase of DGD namespace/name: 1 for phase, 0 for every
// other phase. An unknown phase (not a RolloutPhase) gets its own series at 1.
func ObservePhase(namespace, name, phase string) {
	for _, p := range rolloutPhases {
		RolloutPhase.WithLabelValues(namespace, name, string(p)).Set(0)
	}
	RolloutPhase.WithLabelValues(namespace, name, phase).Set(1)
}

// ObserveRolloutDuration records one completed rollout that took seconds.
func ObserveRolloutDuration(seconds float64) {
	RolloutDuration.Observe(seconds)
}

// ObserveRevisionsKept sets dgd_revisions_kept of DGD namespace/name to n.
func ObserveRevisionsKept(namespace, name string, n int) {
	RevisionsKept.WithLabelValues(namespace, name).Set(float64(n))
}

// ObserveReconcileError counts one failed reconcile pass of DGD namespace/name.
func ObserveReconcileError(namespace, name string) {
	ReconcileErrors.WithLabelValues(namespace, name).Inc()
}

// ObserveStatus records the status a reconcile pass leaves, given the status the pass
// started from (old, possibly nil) and the one it leaves (cur): the phase (ObservePhase),
// the current step (RolloutCurrentStep) and, when cur completes a rollout that old had not (rollingUpdate.endTime newly set),
// its duration (ObserveRolloutDuration). Call it after a status write succeeded and on a
// pass that needs no write (old equal to cur: the phase is set, so a restarted operator
// reports it at once, and no duration is observed); not after a failed write, so that a
// write retried after a conflict does not observe the same rollout twice.
func ObserveStatus(namespace, name string, old, cur *v1alpha1.DynamoGraphDeploymentStatus) {
	ru := cur.RollingUpdate
	if ru == nil {
		return
	}
	ObservePhase(namespace, name, string(ru.Phase))
	step := -1.0
	if ru.CurrentStepIndex != nil && ru.CurrentStepKind != "" {
		step = float64(*ru.CurrentStepIndex + 1)
	}
	RolloutCurrentStep.WithLabelValues(namespace, name).Set(step)
	wasDone := old != nil && old.RollingUpdate != nil && old.RollingUpdate.EndTime != nil
	if ru.Phase == v1alpha1.RolloutCompleted && ru.EndTime != nil && ru.StartTime != nil && !wasDone {
		ObserveRolloutDuration(ru.EndTime.Sub(ru.StartTime.Time).Seconds())
	}
}

// ForgetDGD deletes every per-DGD series of DGD namespace/name (steps, phase, current
// step, revisions kept, reconcile errors, analysis measurements), so a deleted DGD stops being reported. The duration
// histogram has no per-DGD series.
func ForgetDGD(namespace, name string) {
	labels := prometheus.Labels{"namespace": namespace, "name": name}
	RolloutSteps.DeletePartialMatch(labels)
	RolloutPhase.DeletePartialMatch(labels)
	RolloutCurrentStep.DeletePartialMatch(labels)
	RevisionsKept.DeletePartialMatch(labels)
	ReconcileErrors.DeletePartialMatch(labels)
	AnalysisMeasurements.DeletePartialMatch(labels)
}
