package v1alpha1

import "encoding/json"

// AnnotationRestartAt is the pod-template annotation a restart sets to spec.restart.id
// on every component, the key Dynamo's operator uses (ai-dynamo/dynamo
// deploy/operator/internal/consts/consts.go RestartAnnotation, set by
// deploy/operator/internal/dynamo/graph.go DetermineRestartState to the restart id).
// A new value is a new pod template: workers roll to a new revision, other components
// update in place.
const AnnotationRestartAt = "nvidia.com/restartAt"

// Restart strategy types (Dynamo's spec.restart.strategy.type; Sequential is the
// default).
const (
	RestartSequential = "Sequential"
	RestartParallel   = "Parallel"
)

// RestartSpec is Dynamo's spec.restart, which the CRD keeps as given (Raw): an id whose
// change requests a restart, and a strategy.
type RestartSpec struct {
	ID       string          `json:"id"`
	Strategy RestartStrategy `json:"strategy"`
}

// RestartStrategy is Dynamo's spec.restart.strategy: Sequential (in order, by default
// the components' order) or Parallel.
type RestartStrategy struct {
	Type  string   `json:"type,omitempty"`
	Order []string `json:"order,omitempty"`
}

// RestartRequest returns spec.restart decoded (zero when absent or not an object). The
// strategy type defaults to Sequential, as Dynamo's CRD defaults it.
func (d *DynamoGraphDeployment) RestartRequest() RestartSpec {
	var r RestartSpec
	if d.Spec.Restart != nil && len(d.Spec.Restart.Raw) > 0 {
		_ = json.Unmarshal(d.Spec.Restart.Raw, &r) // kept as given: a shape Dynamo refuses is no request
	}
	if r.Strategy.Type == "" {
		r.Strategy.Type = RestartSequential
	}
	return r
}

// RestartID is the id every component's pod template carries in AnnotationRestartAt:
// spec.restart.id, or, once spec.restart is removed, the last id the operator acted on
// (status.restart.observedID), as Dynamo's DetermineRestartState keeps the annotation of
// a completed restart; "" when the DGD was never restarted, so that its pod templates
// (and hashes) are those of an operator that knew nothing of restarts.
func (d *DynamoGraphDeployment) RestartID() string {
	if id := d.RestartRequest().ID; id != "" {
		return id
	}
	if d.Status.Restart != nil {
		return d.Status.Restart.ObservedID
	}
	return ""
}

// RestartPhase is Dynamo's status.restart.phase.
// +kubebuilder:validation:Enum=Pending;Restarting;Completed;Failed;Superseded
type RestartPhase string

// Restart phases (Dynamo's v1beta1 RestartPhase values).
const (
	RestartPhasePending    RestartPhase = "Pending"
	RestartPhaseRestarting RestartPhase = "Restarting"
	RestartPhaseCompleted  RestartPhase = "Completed"
	RestartPhaseFailed     RestartPhase = "Failed"
	RestartPhaseSuperseded RestartPhase = "Superseded"
)

// RestartStatus is Dynamo's status.restart: the restart the operator last acted on.
type RestartStatus struct {
	// ObservedID is the spec.restart.id this status describes.
	// +optional
	ObservedID string `json:"observedID,omitempty"`
	// Phase is Restarting while the rollout the restart started runs, Completed once
	// every component runs the restarted template, Superseded when another id or a
	// spec change came first, Failed when that rollout was aborted or failed.
	// +optional
	Phase RestartPhase `json:"phase,omitempty"`
	// InProgress lists the services still rolling onto the restarted template.
	// +optional
	InProgress []string `json:"inProgress,omitempty"`
	// Revision is the revision the restart rolls to (this operator's addition to
	// Dynamo's shape): a later update revision under the same id is a spec change
	// that superseded it.
	// +optional
	Revision string `json:"revision,omitempty"`
	// Message says how the restart was carried out (how the strategy maps onto this
	// operator's rollout) or why it ended.
	// +optional
	Message string `json:"message,omitempty"`
}
