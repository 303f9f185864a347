package app

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

func newAbortCommand(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "abort NAME",
		Short: "Abort the rollout: every worker returns to the stable revision",
		Long: "Abort the rollout to the update revision: the operator moves every worker service\n" +
			"back to the stable revision (status.currentRevision) with the rollout's budgets, as a\n" +
			"rollout in reverse, and reports phase Aborted. The spec is not changed: a new worker\n" +
			"revision, or \"kubectl dgd rollout retry\", starts a rollout again. It writes the\n" +
			"nvidia.com/rollout-abort annotation for this revision and attempt.",
		Example: "  kubectl dgd rollout abort vllm-disagg",
		Args:    exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := c.connect()
			if err != nil {
				return err
			}
			return s.abort(cmd.Context(), c.streams.Out, args[0])
		},
	}
}

func newRetryCommand(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "retry NAME",
		Short: "Start an aborted rollout again from its first step",
		Long: "Start the aborted rollout to the update revision again, as its next attempt: from its\n" +
			"first step, with no measurement of the aborted attempt. It writes the\n" +
			"nvidia.com/rollout-retry annotation for this revision and the aborted attempt.",
		Example: "  kubectl dgd rollout retry vllm-disagg",
		Args:    exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := c.connect()
			if err != nil {
				return err
			}
			return s.retry(cmd.Context(), c.streams.Out, args[0])
		},
	}
}

// abort annotates name to abort the rollout to its update revision (this attempt).
func (s *session) abort(ctx context.Context, out io.Writer, name string) error {
	dgd, err := s.get(ctx, name)
	if err != nil {
		return err
	}
	ru := dgd.Status.RollingUpdate
	switch {
	case ru == nil || dgd.Status.ObservedGeneration != dgd.Generation:
		return fmt.Errorf("dynamographdeployment %q has no rollout to abort yet: wait for the operator to observe generation %d", name, dgd.Generation)
	case ru.Abort != nil:
		_, err := fmt.Fprintf(out, "%s already aborted\n", ref(name))
		return err
	case ru.Phase == v1alpha1.RolloutCompleted || dgd.Status.CurrentRevision == dgd.Status.UpdateRevision:
		return fmt.Errorf("dynamographdeployment %q has no rollout to abort: revision %d is rolled out", name, dgd.Status.UpdateRevisionNumber)
	}
	rev := dgd.Status.UpdateRevisionNumber
	return s.mergePatch(ctx, out, dgd, map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{v1alpha1.AnnotationAbort: v1alpha1.AttemptTag(rev, ru.Attempt)}},
	}, fmt.Sprintf("aborted (revision %d, attempt %d)", rev, max(ru.Attempt, 1)))
}

// retry annotates name to start its aborted rollout again.
func (s *session) retry(ctx context.Context, out io.Writer, name string) error {
	dgd, err := s.get(ctx, name)
	if err != nil {
		return err
	}
	ru := dgd.Status.RollingUpdate
	if ru == nil || ru.Abort == nil {
		return fmt.Errorf("dynamographdeployment %q has no aborted rollout to retry", name)
	}
	rev := dgd.Status.UpdateRevisionNumber
	return s.mergePatch(ctx, out, dgd, map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{v1alpha1.AnnotationRetry: v1alpha1.AttemptTag(rev, ru.Attempt)}},
	}, fmt.Sprintf("retried (revision %d, attempt %d)", rev, max(ru.Attempt, 1)+1))
}
