package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/revisions"
)

func newHistoryCommand(c *cli) *cobra.Command {
	var revision int64
	cmd := &cobra.Command{
		Use:   "history NAME [--revision=N]",
		Short: "View the revisions of a DynamoGraphDeployment",
		Long: "List the revisions of a DynamoGraphDeployment with their change cause (the\n" +
			"kubernetes.io/change-cause annotation of the DGD's change), or, with --revision,\n" +
			"print the services that revision recorded. A revision records the whole graph;\n" +
			"one that changed only stable services (frontend, planner...) rolled no worker.",
		Example: "  kubectl dgd rollout history vllm-disagg\n" +
			"  kubectl dgd rollout history vllm-disagg --revision=2",
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := c.connect()
			if err != nil {
				return err
			}
			return runHistory(cmd.Context(), s, c.streams.Out, args[0], revision)
		},
	}
	cmd.Flags().Int64Var(&revision, "revision", 0, "See the services of this revision")
	return cmd
}

// runHistory prints the history of name, or the services of one revision.
func runHistory(ctx context.Context, s *session, out io.Writer, name string, revision int64) error {
	_, revs, err := s.history(ctx, name)
	if err != nil {
		return err
	}
	if revision != 0 {
		rev := revisions.FindRevision(revs, revision)
		if rev == nil {
			return revisionNotFound(revision)
		}
		text, err := templatesYAML(rev)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s with revision #%d\n%s", ref(name), revision, text)
		return err
	}
	fmt.Fprintln(out, ref(name))
	if len(revs) == 0 {
		_, err := fmt.Fprintln(out, "No rollout history found.")
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tCHANGE-CAUSE")
	for _, rev := range revs {
		cause := rev.Annotations[v1alpha1.AnnotationChangeCause]
		if cause == "" {
			cause = "<none>"
		}
		fmt.Fprintf(tw, "%d\t%s\n", rev.Revision, cause)
	}
	return tw.Flush()
}

// templatesYAML renders the services rev records as YAML shaped like a partial DGD spec
// (services, and envs and backend when set). Replicas are left out: they are not part of
// a template, and an undo keeps the current ones.
func templatesYAML(rev *appsv1.ControllerRevision) (string, error) {
	data, err := revisions.DecodeRevisionData(rev)
	if err != nil {
		return "", err
	}
	for name, svc := range data.Services {
		if svc != nil {
			svc = svc.DeepCopy()
			svc.Replicas = nil
			data.Services[name] = svc
		}
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return "", fmt.Errorf("printing revision %d: %w", rev.Revision, err)
	}
	var tree map[string]any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return "", fmt.Errorf("printing revision %d: %w", rev.Revision, err)
	}
	delete(tree, "wholeGraph")    // how the data is stored, not what the graph was
	delete(tree, "renderVersion") // the operator's rendering generation, not something a user wrote
	services, _ := tree["services"].(map[string]any)
	for _, svc := range services {
		pruneMainContainer(svc)
	}
	text, err := yaml.Marshal(tree)
	if err != nil {
		return "", fmt.Errorf("printing revision %d: %w", rev.Revision, err)
	}
	return string(text), nil
}

// pruneMainContainer drops the fields Go always serializes and a user never wrote: the
// pod spec's "containers: null" in extraPodSpec (its PodSpec is inline and containers
// has no omitempty), and the main container's empty name and empty resources.
func pruneMainContainer(svc any) {
	spec, _ := svc.(map[string]any)
	eps, _ := spec["extraPodSpec"].(map[string]any)
	if c, ok := eps["containers"]; ok && c == nil {
		delete(eps, "containers")
	}
	mc, _ := eps["mainContainer"].(map[string]any)
	if mc == nil {
		return
	}
	if name, ok := mc["name"].(string); ok && name == "" {
		delete(mc, "name")
	}
	if res, ok := mc["resources"].(map[string]any); ok && len(res) == 0 {
		delete(mc, "resources")
	}
}

// revisionNotFound is kubectl's error for a revision number not in history.
func revisionNotFound(revision int64) error {
	return fmt.Errorf("unable to find specified revision %d in history", revision)
}
