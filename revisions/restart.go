package revisions

import (
	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// WithRestart returns dgd as its pods are rendered: when the DGD carries a restart id
// (v1alpha1.DynamoGraphDeployment.RestartID), every service's annotations hold
// v1alpha1.AnnotationRestartAt set to it, as Dynamo's operator puts it on every
// component it restarts (ai-dynamo/dynamo deploy/operator/internal/dynamo/graph.go,
// DetermineRestartState; the controller's dgd_restart_reconciler.go decides when).
// Service annotations reach the pod template of every backend (render's annotations)
// and the hashes: a worker's ServiceTemplate.Annotations (so a new id is a new worker
// revision, rolled under spec.rollout) and a stable service's recorded template (so it
// is a new revision updated in place). A service that sets the annotation itself keeps
// its value.
//
// Without an id, dgd itself is returned: a DGD never restarted hashes byte for byte as
// before restarts existed. Otherwise the result is a copy whose services are copies;
// dgd is not modified. WithRestart of its own result is that result's equal.
func WithRestart(dgd *v1alpha1.DynamoGraphDeployment) *v1alpha1.DynamoGraphDeployment {
	id := dgd.RestartID()
	if id == "" {
		return dgd
	}
	out := *dgd
	out.Spec.Services = make(map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec, len(dgd.Spec.Services))
	for name, s := range dgd.Spec.Services {
		if s == nil {
			continue
		}
		if _, set := s.Annotations[v1alpha1.AnnotationRestartAt]; !set {
			c := *s
			c.Annotations = make(map[string]string, len(s.Annotations)+1)
			for k, v := range s.Annotations {
				c.Annotations[k] = v
			}
			c.Annotations[v1alpha1.AnnotationRestartAt] = id
			s = &c
		}
		out.Spec.Services[name] = s
	}
	return &out
}

// withoutRestart removes the annotation WithRestart added with value id from a
// restored service (Restore): the restart id stays spec.restart's, not the services'.
func withoutRestart(s *v1alpha1.DynamoComponentDeploymentSharedSpec, id string) {
	if id != "" && s.Annotations[v1alpha1.AnnotationRestartAt] == id {
		delete(s.Annotations, v1alpha1.AnnotationRestartAt)
		if len(s.Annotations) == 0 {
			s.Annotations = nil
		}
	}
}

// NewRestart returns spec.restart.id when it asks for a restart the operator has not
// acted on yet: it differs from status.restart.observedID and the DGD already runs (it
// has an update revision; on a DGD being created, which Dynamo's admission refuses a
// restart on, the first revision carries the id and nothing restarts). "" otherwise.
func NewRestart(dgd *v1alpha1.DynamoGraphDeployment) string {
	id := dgd.RestartRequest().ID
	if id == "" || dgd.Status.UpdateRevision == "" {
		return ""
	}
	if r := dgd.Status.Restart; r != nil && r.ObservedID == id {
		return ""
	}
	return id
}
