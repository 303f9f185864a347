package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// errTimeout is kubectl's message when --timeout runs out.
var errTimeout = errors.New("timed out waiting for the condition")

func newStatusCommand(c *cli) *cobra.Command {
	var (
		watchFlag bool
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status NAME [--watch=true] [--timeout=0]",
		Short: "Show the status of a DynamoGraphDeployment's rollout",
		Long: "Show the status of the rollout. By default it watches the DGD until the rollout is\n" +
			"done: it exits 0 when every worker service runs the update revision and is ready (or\n" +
			"when the rollout is held at its partition), and non-zero when the rollout fails\n" +
			"(Progressing condition False, such as ProgressDeadlineExceeded) or --timeout passes.",
		Example: "  kubectl dgd rollout status vllm-disagg\n" +
			"  kubectl dgd rollout status vllm-disagg --timeout=5m",
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := c.connect()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			err = runStatus(ctx, s, c.streams.Out, args[0], watchFlag)
			if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return errTimeout
			}
			return err
		},
	}
	cmd.Flags().BoolVarP(&watchFlag, "watch", "w", true, "Watch the status of the rollout until it's done")
	cmd.Flags().DurationVar(&timeout, "timeout", 0,
		"The length of time to wait before ending watch, zero means never. Any other values should contain a corresponding time unit (e.g. 1s, 2m, 3h)")
	return cmd
}

// runStatus prints the rollout status of name and, with watch, follows a watch on the
// DGD until the rollout is done or fails. Each version of the DGD yields a line per
// service still rolling; a line already printed for the previous version is not printed
// again, so a service that did not move stays quiet while another one moves.
func runStatus(ctx context.Context, s *session, out io.Writer, name string, watchDGD bool) error {
	shown := map[string]bool{}
	report := func(dgd *v1alpha1.DynamoGraphDeployment) (bool, error) {
		lines, done, err := rolloutStatus(dgd)
		now := map[string]bool{}
		for _, line := range lines {
			if !shown[line] {
				fmt.Fprint(out, line)
			}
			now[line] = true
		}
		shown = now
		return done, err
	}
	for {
		dgd, rv, err := s.getWithListRV(ctx, name)
		if err != nil {
			return err
		}
		if done, err := report(dgd); done || err != nil || !watchDGD {
			return err
		}
		done, err := s.follow(ctx, name, rv, report)
		if done || err != nil {
			return err
		}
		// The watch ended (closed by the server, or too old a resourceVersion): list again.
	}
}

// selector selects the DGD name for lists and watches.
func (s *session) selector(name string) *client.ListOptions {
	return &client.ListOptions{Namespace: s.namespace, FieldSelector: fields.OneTermEqualSelector("metadata.name", name)}
}

// getWithListRV reads the DGD name with a list, whose resourceVersion a watch can
// start from without missing an update.
func (s *session) getWithListRV(ctx context.Context, name string) (*v1alpha1.DynamoGraphDeployment, string, error) {
	var list v1alpha1.DynamoGraphDeploymentList
	if err := s.client.List(ctx, &list, s.selector(name)); err != nil {
		return nil, "", err
	}
	if len(list.Items) == 0 {
		return nil, "", apierrors.NewNotFound(resource, name)
	}
	return &list.Items[0], list.ResourceVersion, nil
}

// follow watches the DGD name from resourceVersion rv and reports every version of it
// until report says done or fails. It returns done false, err nil when the watch ends
// without that (the caller lists again).
func (s *session) follow(ctx context.Context, name, rv string,
	report func(*v1alpha1.DynamoGraphDeployment) (bool, error)) (bool, error) {
	opts := s.selector(name)
	opts.Raw = &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}
	w, err := s.client.Watch(ctx, &v1alpha1.DynamoGraphDeploymentList{}, opts)
	if err != nil {
		return false, err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, ctx.Err()
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if dgd, ok := ev.Object.(*v1alpha1.DynamoGraphDeployment); ok {
					if done, err := report(dgd); done || err != nil {
						return done, err
					}
				}
			case watch.Deleted:
				return false, fmt.Errorf("dynamographdeployment %q was deleted", name)
			case watch.Error:
				return false, nil // e.g. 410 Gone: list again
			}
		}
	}
}

// rolloutStatus says where dgd's rollout stands, as kubectl's status viewers do: the
// lines to print, whether the rollout is done (complete, or held at its partition), and
// an error when it failed. Checks, in order: the spec is observed; the spec is valid;
// no write was refused and no name is someone else's (Stalled); the Progressing
// condition is not False; a forbidden write is being retried; the rollout is held at its partition; every
// service is updated, has no old replicas and has its updated replicas ready; the phase
// is Completed. It reads status fields only, never the words of a message.
func rolloutStatus(dgd *v1alpha1.DynamoGraphDeployment) ([]string, bool, error) {
	if lines := observing(dgd); lines != nil {
		return lines, false, nil
	}
	if err := failed(dgd); err != nil {
		return nil, false, err
	}
	ru := dgd.Status.RollingUpdate
	if ru == nil {
		ru = &v1alpha1.RollingUpdateStatus{}
	}
	// Held at spec.rollout.partition is done; a step's partition reached is not: the
	// next step follows (spec.rollout.steps cannot end at a partition short of 100%).
	if ru.Phase == v1alpha1.RolloutPaused && ru.Reason == v1alpha1.ReasonPartitioned && len(dgd.RolloutOrDefault().Steps) == 0 {
		return []string{partitionedLine(dgd)}, true, nil
	}
	lines := pausedLines(dgd, ru)
	if c := meta.FindStatusCondition(dgd.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Reason == v1alpha1.ReasonWriteForbidden {
		lines = append(lines, fmt.Sprintf("Waiting for rollout to finish: the API server forbids a write, retrying: %s...\n", c.Message))
	}
	if c := meta.FindStatusCondition(dgd.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Reason == v1alpha1.ReasonObserveFailed {
		lines = append(lines, fmt.Sprintf("Waiting for rollout to finish: the operator cannot read what it decides from, retrying: %s...\n", c.Message))
	}
	if c := meta.FindStatusCondition(dgd.Status.Conditions, v1alpha1.ConditionTakeOverHeld); c != nil && c.Status == metav1.ConditionTrue {
		lines = append(lines, fmt.Sprintf("Waiting for rollout to finish: %s: %s...\n", c.Reason, c.Message))
	}
	for _, name := range dgd.ServiceNames() {
		if msg := serviceWaiting(dgd, name); msg != "" {
			lines = append(lines, fmt.Sprintf("Waiting for rollout to finish: %s: %s...\n", name, msg))
		}
	}
	if r := dgd.Status.Restart; r != nil && r.Phase == v1alpha1.RestartPhaseRestarting && len(r.InProgress) > 0 {
		lines = append(lines, fmt.Sprintf("Waiting for rollout to finish: restart %s: %s still restarting...\n", r.ObservedID, strings.Join(r.InProgress, ", ")))
	}
	if len(lines) > 0 {
		return lines, false, nil
	}
	if ru.Phase != v1alpha1.RolloutCompleted {
		msg := ru.Message
		if msg == "" {
			msg = fmt.Sprintf("phase %s", ru.Phase)
		}
		return []string{fmt.Sprintf("Waiting for rollout to finish: %s...\n", msg)}, false, nil
	}
	return []string{fmt.Sprintf("dynamographdeployment %q successfully rolled out\n", dgd.Name)}, true, nil
}

// observing is the line to print while the operator has not acted on the spec, an
// abort or a retry yet; nil once it has.
func observing(dgd *v1alpha1.DynamoGraphDeployment) []string {
	st := &dgd.Status
	if st.ObservedGeneration < dgd.Generation || (st.UpdateRevision == "" && !invalid(dgd)) {
		return []string{"Waiting for dynamographdeployment spec update to be observed...\n"}
	}
	ru := st.RollingUpdate
	if ru == nil || invalid(dgd) {
		return nil
	}
	// An abort or a retry asked for this attempt that the operator has not acted on.
	tag := v1alpha1.AttemptTag(st.UpdateRevisionNumber, ru.Attempt)
	switch {
	case ru.Abort != nil && dgd.Annotations[v1alpha1.AnnotationRetry] == tag:
		return []string{"Waiting for the retry to be observed...\n"}
	case ru.Abort == nil && dgd.Annotations[v1alpha1.AnnotationAbort] == tag && ru.Phase != v1alpha1.RolloutCompleted:
		return []string{"Waiting for the abort to be observed...\n"}
	}
	return nil
}

// invalid reports that the operator found the spec invalid (Ready False, InvalidSpec).
func invalid(dgd *v1alpha1.DynamoGraphDeployment) bool {
	c := meta.FindStatusCondition(dgd.Status.Conditions, v1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonInvalidSpec
}

// failed is the error of a rollout that cannot go on: an invalid spec, or the
// Progressing condition False.
func failed(dgd *v1alpha1.DynamoGraphDeployment) error {
	if invalid(dgd) {
		c := meta.FindStatusCondition(dgd.Status.Conditions, v1alpha1.ConditionReady)
		return fmt.Errorf("dynamographdeployment %q has an invalid spec: %s", dgd.Name, c.Message)
	}
	if c := meta.FindStatusCondition(dgd.Status.Conditions, v1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue &&
		(c.Reason == v1alpha1.ReasonWriteRefused || c.Reason == v1alpha1.ReasonNameConflict) {
		return fmt.Errorf("dynamographdeployment %q cannot go on (%s): %s", dgd.Name, c.Reason, c.Message)
	}
	c := meta.FindStatusCondition(dgd.Status.Conditions, v1alpha1.ConditionProgressing)
	if c == nil || c.Status != metav1.ConditionFalse {
		return nil
	}
	switch c.Reason {
	case v1alpha1.ReasonAnalysisFailed, v1alpha1.ReasonRolloutAborted:
		return fmt.Errorf("dynamographdeployment %q rollout aborted (%s): %s (start it again with \"kubectl dgd rollout retry %s\")", dgd.Name, c.Reason, c.Message, dgd.Name)
	case v1alpha1.ReasonProgressDeadlineExceeded:
		return fmt.Errorf("dynamographdeployment %q exceeded its progress deadline: %s", dgd.Name, c.Message)
	}
	return fmt.Errorf("dynamographdeployment %q rollout failed (%s): %s", dgd.Name, c.Reason, c.Message)
}

// pausedLines are the lines of a paused rollout: at a step of spec.rollout.steps (with
// how to go on, and its analysis), or paused by spec.rollout.paused.
func pausedLines(dgd *v1alpha1.DynamoGraphDeployment, ru *v1alpha1.RollingUpdateStatus) []string {
	switch {
	case ru.Phase == v1alpha1.RolloutPaused && !dgd.RolloutOrDefault().Paused && ru.CurrentStepIndex != nil:
		hint := fmt.Sprintf("promote with \"kubectl dgd rollout promote %s\"", dgd.Name)
		if ru.Reason == v1alpha1.ReasonAnalysisInconclusive {
			hint += fmt.Sprintf(" or abort with \"kubectl dgd rollout abort %s\"", dgd.Name)
		}
		line := fmt.Sprintf("Waiting for rollout to finish: %s (%s)...\n", stepLine(dgd, ru), hint)
		return append([]string{line}, analysisLines(ru)...)
	case ru.Phase == v1alpha1.RolloutPaused:
		return []string{fmt.Sprintf("Waiting for rollout to finish: paused (resume with \"kubectl dgd rollout resume %s\")...\n", dgd.Name)}
	}
	return nil
}

// stepLine says which step of spec.rollout.steps the rollout holds at and why, from
// the status's step fields, 1-based as the operator's messages: "step 2/3: paused until
// promoted".
func stepLine(dgd *v1alpha1.DynamoGraphDeployment, ru *v1alpha1.RollingUpdateStatus) string {
	list, i := dgd.RolloutOrDefault().Steps, int(*ru.CurrentStepIndex)
	where := fmt.Sprintf("step %d/%d", i+1, len(list))
	switch ru.CurrentStepKind {
	case v1alpha1.StepPause:
		if ru.CurrentStepEndTime == nil || i >= len(list) || list[i].Pause == nil || list[i].Pause.Duration == nil {
			return where + ": paused until promoted"
		}
		return fmt.Sprintf("%s: paused for %s, until %s", where, list[i].Pause.Duration.Duration, ru.CurrentStepEndTime.UTC().Format(time.RFC3339))
	case v1alpha1.StepAnalysis:
		if ru.Reason == v1alpha1.ReasonAnalysisInconclusive {
			return where + ": analysis inconclusive, promote or abort"
		}
		return where + ": analysis running"
	}
	return where
}

// serviceCounts are one service's replicas as the status reports them: desired, on the
// update revision (or the current template, for a service updated in place), ready among
// those, and in total.
type serviceCounts struct {
	desired, updated, updatedReady, total int32
}

// countsOf reads the counts of service name from dgd's status. A worker service's
// updated replicas are those of its workloads at status.updateRevisionNumber.
func countsOf(dgd *v1alpha1.DynamoGraphDeployment, name string) serviceCounts {
	svc := dgd.Spec.Services[name]
	ss := dgd.Status.Services[name]
	c := serviceCounts{desired: svc.DesiredReplicas(), total: ss.Replicas}
	if !svc.IsWorker() {
		c.updated = ss.UpdatedReplicas
		c.updatedReady = min(ss.AvailableReplicas, ss.UpdatedReplicas)
		return c
	}
	for _, w := range ss.Workloads {
		if w.Revision == dgd.Status.UpdateRevisionNumber {
			c.updated += w.Replicas
			c.updatedReady += min(w.ReadyReplicas, w.Replicas)
		}
	}
	return c
}

// serviceWaiting returns what service name still waits for, in kubectl's Deployment
// words, or "" when it is rolled out.
func serviceWaiting(dgd *v1alpha1.DynamoGraphDeployment, name string) string {
	c := countsOf(dgd, name)
	switch {
	case c.updated < c.desired:
		return fmt.Sprintf("%d out of %d new replicas have been updated", c.updated, c.desired)
	case c.total > c.updated:
		return fmt.Sprintf("%d old replicas are pending termination", c.total-c.updated)
	case c.updatedReady < c.desired:
		return fmt.Sprintf("%d of %d updated replicas are available", c.updatedReady, c.desired)
	}
	return ""
}

// partitionedLine is the done line of a rollout held at its partition, with every
// worker service's updated replicas.
func partitionedLine(dgd *v1alpha1.DynamoGraphDeployment) string {
	var parts []string
	for _, name := range dgd.WorkerServiceNames() {
		c := countsOf(dgd, name)
		parts = append(parts, fmt.Sprintf("%s %d of %d", name, c.updated, c.desired))
	}
	return fmt.Sprintf("partitioned roll out complete: %s new replicas have been updated...\n", strings.Join(parts, ", "))
}

// analysisLines describe the analysis step a rollout holds at: one line per metric,
// with its tallies and latest value.
func analysisLines(ru *v1alpha1.RollingUpdateStatus) []string {
	if ru.CurrentStepIndex == nil {
		return nil
	}
	var lines []string
	for _, run := range ru.Analyses {
		if run.Step != *ru.CurrentStepIndex {
			continue
		}
		for _, m := range run.Metrics {
			last := "no measurement yet"
			if n := len(m.Measurements); n > 0 {
				l := m.Measurements[n-1]
				last = fmt.Sprintf("last %s", l.Phase)
				if l.Value != "" {
					last += " " + l.Value
				}
				if l.Phase == v1alpha1.MeasurementError {
					last += ": " + l.Message
				}
			}
			lines = append(lines, fmt.Sprintf("  analysis %s: %s (%d successful, %d failed, %d inconclusive, %d errors; %s)\n",
				m.Name, m.Phase, m.Successful, m.Failed, m.Inconclusive, m.Error, last))
		}
	}
	return lines
}
