package app

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// none is what kubectl prints for a column with no value.
const none = "<none>"

func newListCommand(c *cli) *cobra.Command {
	var allNamespaces bool
	cmd := &cobra.Command{
		Use:   "list [-n NAMESPACE | -A]",
		Short: "List DynamoGraphDeployments with their rollout phase, step and revision",
		Long: "List the DynamoGraphDeployments of the namespace (or, with -A, of every namespace)\n" +
			"with what their status says: READY (ready/desired replicas of every service), PHASE\n" +
			"of the rollout, STEP (the step of spec.rollout.steps it is at, 1-based, of how many;\n" +
			"\"-\" without steps) and REVISION (the update revision's number).",
		Example: "  kubectl dgd list\n" +
			"  kubectl dgd list -A",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := c.connect()
			if err != nil {
				return err
			}
			return s.list(cmd.Context(), c.streams.Out, allNamespaces)
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "List DynamoGraphDeployments of every namespace")
	return cmd
}

// list prints the DGDs of the session's namespace, or of every namespace.
func (s *session) list(ctx context.Context, out io.Writer, allNamespaces bool) error {
	var list v1alpha1.DynamoGraphDeploymentList
	ns := s.namespace
	if allNamespaces {
		ns = ""
	}
	if err := s.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return err
	}
	return printList(out, list.Items, allNamespaces, s.namespace)
}

// printList writes dgds as a table sorted by namespace and name, or kubectl's "No
// resources found" line when there are none.
func printList(out io.Writer, dgds []v1alpha1.DynamoGraphDeployment, allNamespaces bool, namespace string) error {
	if len(dgds) == 0 {
		where := " in " + namespace + " namespace"
		if allNamespaces {
			where = ""
		}
		_, err := fmt.Fprintf(out, "No resources found%s.\n", where)
		return err
	}
	dgds = slices.Clone(dgds)
	slices.SortFunc(dgds, func(a, b v1alpha1.DynamoGraphDeployment) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	tw := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	header := "NAME\tREADY\tPHASE\tSTEP\tREVISION"
	if allNamespaces {
		header = "NAMESPACE\t" + header
	}
	fmt.Fprintln(tw, header)
	for i := range dgds {
		row := listRow(&dgds[i])
		if allNamespaces {
			row = dgds[i].Namespace + "\t" + row
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

// listRow is one DGD's row (without the namespace), from its status.
func listRow(dgd *v1alpha1.DynamoGraphDeployment) string {
	st := &dgd.Status
	ready, phase, revision := or(st.Ready, none), none, none
	if ru := st.RollingUpdate; ru != nil && ru.Phase != "" {
		phase = string(ru.Phase)
	}
	if st.UpdateRevisionNumber > 0 {
		revision = fmt.Sprint(st.UpdateRevisionNumber)
	}
	return strings.Join([]string{dgd.Name, ready, phase, stepOf(dgd), revision}, "\t")
}

// stepOf is the step "N/M" of spec.rollout.steps the rollout is at, 1-based as the
// operator's messages count (status.rollingUpdate.currentStepIndex is 0-based, and M once
// the steps are done), or "-" without steps.
func stepOf(dgd *v1alpha1.DynamoGraphDeployment) string {
	steps := len(dgd.RolloutOrDefault().Steps)
	if steps == 0 {
		return "-"
	}
	ru := dgd.Status.RollingUpdate
	if ru == nil || ru.CurrentStepIndex == nil {
		return fmt.Sprintf("-/%d", steps)
	}
	return fmt.Sprintf("%d/%d", min(int(*ru.CurrentStepIndex)+1, steps), steps)
}

// or returns s, or def when s is empty.
func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
