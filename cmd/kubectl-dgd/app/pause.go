package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// validPercent is the CRD's rule for a percentage partition: 0% to 100%.
var validPercent = regexp.MustCompile(`^(100|[1-9]?[0-9])%$`)

// pauseFields and resumeFields are what pause and resume merge into spec.rollout, and
// isPaused and isResumed when they write nothing (the Argo CD actions of
// config/argocd/actions write the same when enabled; a test compares them).
var (
	pauseFields  = map[string]any{"paused": true}
	resumeFields = map[string]any{"paused": false}
	isPaused     = func(r v1alpha1.RolloutSpec) bool { return r.Paused }
	isResumed    = func(r v1alpha1.RolloutSpec) bool { return !r.Paused }
)

func newPauseCommand(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "pause NAME",
		Short: "Freeze a DynamoGraphDeployment's worker rollout at its current split",
		Long: "Set spec.rollout.paused: the operator stops scaling worker workloads (up and down) at\n" +
			"the current split between revisions until \"kubectl dgd rollout resume\".",
		Example: "  kubectl dgd rollout pause vllm-disagg",
		Args:    exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.patchRollout(cmd.Context(), args[0], "paused", "already paused",
				isPaused, pauseFields)
		},
	}
}

func newResumeCommand(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:     "resume NAME",
		Short:   "Resume a paused DynamoGraphDeployment rollout",
		Long:    "Clear spec.rollout.paused: the rollout continues from where it was paused.",
		Example: "  kubectl dgd rollout resume vllm-disagg",
		Args:    exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.patchRollout(cmd.Context(), args[0], "resumed", "already resumed",
				isResumed, resumeFields)
		},
	}
}

func newPartitionCommand(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "partition NAME VALUE",
		Short: "Keep part of every worker service on the old revision (a canary)",
		Long: "Set spec.rollout.partition. A percentage (0% to 100%) keeps that share of every\n" +
			"worker service on the old revision; an integer N keeps N replicas of the largest\n" +
			"worker service and the same fraction of the others. Every pool keeps at least one\n" +
			"replica of every role. The rollout stops at that split (phase Paused, reason\n" +
			"Partitioned); lower the partition to continue, 0 (or \"kubectl dgd rollout promote\")\n" +
			"to complete it.",
		Example: "  kubectl dgd rollout partition vllm-disagg 50%\n" +
			"  kubectl dgd rollout partition vllm-disagg 1",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return fmt.Errorf("%s needs a DynamoGraphDeployment name and a partition value, got %d arguments (see --help)",
					cmd.CommandPath(), len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			value, err := parsePartition(args[1])
			if err != nil {
				return err
			}
			return c.patchRollout(cmd.Context(), args[0], "partitioned at "+value.String(), "already partitioned at "+value.String(),
				func(r v1alpha1.RolloutSpec) bool { return r.Partition != nil && *r.Partition == value },
				map[string]any{"partition": value})
		},
	}
}

func newPromoteCommand(c *cli) *cobra.Command {
	var full bool
	cmd := &cobra.Command{
		Use:   "promote NAME [--full]",
		Short: "Complete a partitioned or paused rollout, or end the current step of a stepped one",
		Long: "Set spec.rollout.partition to 0 and spec.rollout.paused to false: the rollout moves\n" +
			"every worker to the update revision. With spec.rollout.steps, end the current step\n" +
			"instead (a pause without a duration waits for this), or with --full every remaining\n" +
			"step, through the nvidia.com/rollout-promote annotation.",
		Example: "  kubectl dgd rollout promote vllm-disagg\n" +
			"  kubectl dgd rollout promote vllm-disagg --full",
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := c.connect()
			if err != nil {
				return err
			}
			return s.promote(cmd.Context(), c.streams.Out, args[0], full)
		},
	}
	cmd.Flags().BoolVar(&full, "full", false, "With spec.rollout.steps, skip every remaining step")
	return cmd
}

// promote completes the rollout of name: partition 0 and not paused, or, with steps,
// the promotion of the current step (or, full, of every step) of the update revision.
func (s *session) promote(ctx context.Context, out io.Writer, name string, full bool) error {
	dgd, err := s.get(ctx, name)
	if err != nil {
		return err
	}
	ro := dgd.RolloutOrDefault()
	if len(ro.Steps) == 0 {
		zero := intstr.FromInt32(0)
		if !ro.Paused && (ro.Partition == nil || intstr.FromString("0%") == *ro.Partition || zero == *ro.Partition) {
			_, err := fmt.Fprintf(out, "%s already promoted\n", ref(name))
			return err
		}
		return s.mergePatch(ctx, out, dgd, map[string]any{"spec": map[string]any{"rollout": map[string]any{"partition": zero, "paused": false}}}, "promoted")
	}
	ru := dgd.Status.RollingUpdate
	if ru == nil || ru.CurrentStepIndex == nil || dgd.Status.ObservedGeneration != dgd.Generation {
		return fmt.Errorf("dynamographdeployment %q has no rollout step to promote yet: wait for the operator to observe generation %d", name, dgd.Generation)
	}
	step := int(*ru.CurrentStepIndex)
	if step >= len(ro.Steps) && !ro.Paused {
		_, err := fmt.Fprintf(out, "%s already promoted\n", ref(name))
		return err
	}
	value, done := fmt.Sprintf("%d/%d", dgd.Status.UpdateRevisionNumber, step+1), fmt.Sprintf("promoted (step %d/%d)", step+1, len(ro.Steps))
	if full || step >= len(ro.Steps) {
		value, done = fmt.Sprintf("%d/full", dgd.Status.UpdateRevisionNumber), "promoted (every step)"
	}
	return s.mergePatch(ctx, out, dgd, map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{v1alpha1.AnnotationPromote: value}},
		"spec":     map[string]any{"rollout": map[string]any{"paused": false}},
	}, done)
}

// parsePartition parses a partition as the CRD accepts it: a non-negative integer or a
// percentage from 0% to 100%.
func parsePartition(s string) (intstr.IntOrString, error) {
	v := intstr.Parse(s)
	if (v.Type == intstr.Int && v.IntVal >= 0) || (v.Type == intstr.String && validPercent.MatchString(s)) {
		return v, nil
	}
	return v, fmt.Errorf("invalid partition %q: must be a non-negative integer or a percentage from 0%% to 100%%", s)
}

// patchRollout merge-patches spec.rollout of name with fields and prints "<ref> done",
// or "<ref> already" without writing when isSet says the spec already has them.
func (c *cli) patchRollout(ctx context.Context, name, done, already string,
	isSet func(v1alpha1.RolloutSpec) bool, fields map[string]any) error {
	s, err := c.connect()
	if err != nil {
		return err
	}
	return s.patchRollout(ctx, c.streams.Out, name, done, already, isSet, fields)
}

func (s *session) patchRollout(ctx context.Context, out io.Writer, name, done, already string,
	isSet func(v1alpha1.RolloutSpec) bool, fields map[string]any) error {
	dgd, err := s.get(ctx, name)
	if err != nil {
		return err
	}
	if isSet(dgd.RolloutOrDefault()) {
		_, err := fmt.Fprintf(out, "%s %s\n", ref(name), already)
		return err
	}
	return s.mergePatch(ctx, out, dgd, map[string]any{"spec": map[string]any{"rollout": fields}}, done)
}

// mergePatch sends body as a merge patch of dgd and prints "<ref> done".
func (s *session) mergePatch(ctx context.Context, out io.Writer, dgd *v1alpha1.DynamoGraphDeployment, body map[string]any, done string) error {
	patch, err := json.Marshal(body)
	if err != nil {
		return err
	}
	if err := s.client.Patch(ctx, dgd, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s %s\n", ref(dgd.Name), done)
	return err
}
