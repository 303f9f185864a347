package app

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/revisions"
)

// warningApplyManaged is kubectl's warning when an undo writes an object that
// "kubectl apply" manages: the next apply of the old file reverts the rollback.
const warningApplyManaged = "Warning: resource %[1]s was previously managed with 'kubectl apply'. " +
	"Rolling back will not update the %[2]s annotation, which may cause unexpected behavior on future 'kubectl apply' operations. " +
	"Consider using 'kubectl apply' with your previous configuration file instead.\n"

// Dry-run strategies of --dry-run, as kubectl spells them.
const (
	dryRunNone   = "none"
	dryRunClient = "client"
	dryRunServer = "server"
)

func newUndoCommand(c *cli) *cobra.Command {
	var (
		toRevision int64
		dryRun     string
	)
	cmd := &cobra.Command{
		Use:   "undo NAME [--to-revision=N] [--dry-run=none|client|server]",
		Short: "Roll back the workers of a DynamoGraphDeployment to an earlier revision",
		Long: "Re-apply the worker templates of an earlier revision to the DGD spec (by default the\n" +
			"revision before the current update revision). The operator then renumbers that\n" +
			"revision as the newest and rolls the workers to it like any other change. Replicas,\n" +
			"non-worker services and rollout settings are kept.",
		Example: "  kubectl dgd rollout undo vllm-disagg\n" +
			"  kubectl dgd rollout undo vllm-disagg --to-revision=1 --dry-run=server",
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch dryRun {
			case dryRunNone, dryRunClient, dryRunServer:
			default:
				return fmt.Errorf("invalid dry-run value (%s); must be \"none\", \"server\", or \"client\"", dryRun)
			}
			if toRevision < 0 {
				return revisionNotFound(toRevision)
			}
			s, err := c.connect()
			if err != nil {
				return err
			}
			return runUndo(cmd.Context(), s, c.streams, args[0], toRevision, dryRun)
		},
	}
	cmd.Flags().Int64Var(&toRevision, "to-revision", 0, "The revision to roll back to. Default to 0 (the previous revision).")
	cmd.Flags().StringVar(&dryRun, "dry-run", dryRunNone,
		`Must be "none", "server", or "client". If client strategy, only print the worker templates that would be restored, without sending it. If server strategy, submit a server-side request without persisting the resource.`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = dryRunClient
	return cmd
}

// runUndo restores the worker templates of revision toRevision (0: the previous one) into
// the spec of name, retrying on write conflicts with a fresh read.
func runUndo(ctx context.Context, s *session, streams genericiooptions.IOStreams, name string, toRevision int64, dryRun string) error {
	var result, warning string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		dgd, revs, err := s.history(ctx, name)
		if err != nil {
			return err
		}
		target, err := undoTarget(dgd, revs, toRevision)
		if err != nil {
			return err
		}
		current, err := revisions.NewRevision(dgd, 0, dgd.Status.CollisionCount)
		if err != nil {
			return err
		}
		if revisions.Equal(current, target) {
			result = fmt.Sprintf("%s skipped rollback (current template already matches revision %d)\n", ref(name), target.Revision)
			return nil
		}
		if dryRun == dryRunClient {
			text, err := templatesYAML(target, writtenVersion(dgd))
			result = fmt.Sprintf("%s will roll back to revision #%d (dry run)\n%s", ref(name), target.Revision, text)
			return err
		}
		if _, ok := dgd.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
			warning = fmt.Sprintf(warningApplyManaged, ref(name), corev1.LastAppliedConfigAnnotation)
		}
		if err := restore(dgd, target); err != nil {
			return err
		}
		var opts []client.UpdateOption
		result = fmt.Sprintf("%s rolled back\n", ref(name))
		if dryRun == dryRunServer {
			opts = append(opts, client.DryRunAll)
			result = fmt.Sprintf("%s rolled back (server dry run)\n", ref(name))
		}
		return s.client.Update(ctx, dgd, opts...)
	})
	if err != nil {
		return err
	}
	fmt.Fprint(streams.ErrOut, warning)
	_, err = fmt.Fprint(streams.Out, result)
	return err
}

// undoTarget picks the revision to roll back to: number toRevision, or with 0 the newest
// revision older than the DGD's update revision (status.updateRevision; before the
// operator has observed the DGD, the revision matching its spec, else the newest).
func undoTarget(dgd *v1alpha1.DynamoGraphDeployment, revs []*appsv1.ControllerRevision, toRevision int64) (*appsv1.ControllerRevision, error) {
	if len(revs) == 0 {
		return nil, fmt.Errorf("no rollout history found for dynamographdeployment %q", dgd.Name)
	}
	if toRevision > 0 {
		if rev := revisions.FindRevision(revs, toRevision); rev != nil {
			return rev, nil
		}
		return nil, revisionNotFound(toRevision)
	}
	current := currentRevision(dgd, revs)
	var previous *appsv1.ControllerRevision
	for _, rev := range revs { // ascending .revision
		if rev.Revision < current.Revision {
			previous = rev
		}
	}
	if previous == nil {
		return nil, fmt.Errorf("no rollout history found for dynamographdeployment %q before revision %d", dgd.Name, current.Revision)
	}
	return previous, nil
}

// currentRevision returns the DGD's update revision among revs (see undoTarget).
func currentRevision(dgd *v1alpha1.DynamoGraphDeployment, revs []*appsv1.ControllerRevision) *appsv1.ControllerRevision {
	for _, rev := range revs {
		if rev.Name == dgd.Status.UpdateRevision {
			return rev
		}
	}
	if spec, err := revisions.NewRevision(dgd, 0, dgd.Status.CollisionCount); err == nil {
		if equal := revisions.FindEqual(revs, spec); len(equal) > 0 {
			return equal[len(equal)-1]
		}
	}
	return revs[len(revs)-1]
}

// restore writes target's worker templates into dgd's spec (revisions.Restore) and, as
// a Deployment rollback does, sets dgd's kubernetes.io/change-cause to target's (or
// removes it when target has none), so the DGD says why its workers look as they do.
func restore(dgd *v1alpha1.DynamoGraphDeployment, target *appsv1.ControllerRevision) error {
	spec, err := revisions.Restore(dgd, target)
	if err != nil {
		return err
	}
	dgd.Spec = *spec
	if cause, ok := target.Annotations[v1alpha1.AnnotationChangeCause]; ok {
		if dgd.Annotations == nil {
			dgd.Annotations = map[string]string{}
		}
		dgd.Annotations[v1alpha1.AnnotationChangeCause] = cause
	} else {
		delete(dgd.Annotations, v1alpha1.AnnotationChangeCause)
	}
	return nil
}
