package controllers

import (
	"context"
	"fmt"
	"hash/fnv"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/decide"
)

// report writes the status the pass leaves (when it changed) and emits its Events: all
// of them once the status is written (or needs no write), else only those of writes
// made; and records the metrics of the status and the pass's step.
func (r *Reconciler) report(ctx context.Context, s *decide.Snapshot, rep decide.Report, out decide.Outcome) error {
	dgd, old := s.DGD.DeepCopy(), &s.DGD.Status
	if rep.Status == nil {
		r.emit(dgd, rep.Events, false)
		return nil
	}
	if !equality.Semantic.DeepEqual(rep.Status, old) {
		dgd.Status = *rep.Status
		if err := r.updateStatus(ctx, dgd); err != nil {
			r.emit(dgd, rep.Events, false)
			r.logStep(ctx, dgd, out)
			return err
		}
	}
	ObserveStatus(dgd.Namespace, dgd.Name, old, rep.Status)
	if len(out.Progress) > 0 && out.Err == nil && out.Stopped == nil {
		RolloutSteps.WithLabelValues(dgd.Namespace, dgd.Name).Inc()
	}
	r.emit(dgd, rep.Events, true)
	r.logStep(ctx, dgd, out)
	return nil
}

// emit emits a pass's Events about dgd; statusWritten false keeps only those of writes
// made. Each Event's action carries a digest of its message: the events/v1 recorder
// merges Events of the same regarding object, reason and action into one series and
// keeps only the first message, so with a fixed action every step after the first in
// six minutes would be a count on the first step's line, its own message lost. With
// the digest each distinct message is its own Event, and only exact repeats (the same
// failure again) become a series.
func (r *Reconciler) emit(dgd *v1alpha1.DynamoGraphDeployment, events []decide.Event, statusWritten bool) {
	if r.Recorder == nil {
		return
	}
	for _, e := range events {
		if statusWritten || e.Made {
			r.Recorder.Eventf(dgd, nil, e.Type, e.Reason, eventAction(e.Message), "%s", e.Message)
		}
	}
}

// logStep logs one line at info for a pass that moved workers: the DGD (in the
// logger's values), the update revision, the phase the pass left and its writes.
func (r *Reconciler) logStep(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, out decide.Outcome) {
	if len(out.Progress) == 0 {
		return
	}
	phase := v1alpha1.RolloutPhase("")
	if ru := dgd.Status.RollingUpdate; ru != nil {
		phase = ru.Phase
	}
	log.FromContext(ctx).Info("rollout step", "revision", dgd.Status.UpdateRevisionNumber, "phase", phase, "writes", out.Progress)
}

// eventAction is "Rollout-" and 8 hex digits of the message's FNV-1a hash.
func eventAction(msg string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(msg))
	return fmt.Sprintf("Rollout-%08x", h.Sum32())
}

// updateStatus writes dgd's status and remembers what it wrote (statusRV), so the next
// pass does not decide from a cache behind its own write: the one status write of the
// pass's report and of an announcement ahead of it.
func (r *Reconciler) updateStatus(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) error {
	if err := r.Client.Status().Update(ctx, dgd); err != nil {
		return fmt.Errorf("updating status of %s/%s: %w", dgd.Namespace, dgd.Name, err)
	}
	r.statusRV.Store(client.ObjectKeyFromObject(dgd), written{rv: dgd.ResourceVersion, dgd: dgd.DeepCopy()})
	return nil
}

// written is the operator's last status write of a DGD: its resourceVersion, and the
// DGD the API server answered it with until the cache shows it (nil after).
type written struct {
	rv  string
	dgd *v1alpha1.DynamoGraphDeployment
}
