package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

func newRestartCommand(c *cli) *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "restart NAME [--id=ID]",
		Short: "Request a restart of a DynamoGraphDeployment (Dynamo's spec.restart)",
		Long: "Set spec.restart.id to a new value (by default the current time, RFC 3339), Dynamo's way\n" +
			"to ask for a restart of every component. The operator puts the id on every component's\n" +
			"pod template (nvidia.com/restartAt): the worker services roll to a new revision under\n" +
			"spec.rollout (budgets, lockstep, steps, analysis), the other components update in place.\n" +
			"status.restart follows it (Restarting, Completed, Superseded or Failed); follow it with\n" +
			"\"kubectl dgd rollout status NAME\". spec.restart.strategy is kept as it is: workers always\n" +
			"roll together in lockstep, so a Sequential order is not honoured one component at a time\n" +
			"(the RestartStarted Event says so).",
		Example: "  kubectl dgd restart vllm-disagg\n" +
			"  kubectl dgd restart vllm-disagg --id=after-driver-upgrade",
		Args:              exactlyOneName,
		ValidArgsFunction: c.completeName,
		RunE: func(cmd *cobra.Command, args []string) error {
			if id == "" {
				id = time.Now().UTC().Format(time.RFC3339)
			}
			s, err := c.connect()
			if err != nil {
				return err
			}
			return s.restart(cmd.Context(), c.streams.Out, args[0], id)
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "The restart id to set (default: the current time, RFC 3339)")
	return cmd
}

// restart merge-patches spec.restart.id of name to id (a strategy already set is kept),
// or says "already" when the DGD has that id.
func (s *session) restart(ctx context.Context, out io.Writer, name, id string) error {
	dgd, err := s.get(ctx, name)
	if err != nil {
		return err
	}
	if dgd.Spec.Restart != nil {
		var cur struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(dgd.Spec.Restart.Raw, &cur) == nil && cur.ID == id {
			_, err := fmt.Fprintf(out, "%s already restarted with id %q\n", ref(name), id)
			return err
		}
	}
	return s.mergePatch(ctx, out, dgd, map[string]any{"spec": map[string]any{"restart": map[string]any{"id": id}}},
		fmt.Sprintf("restart requested (id %q)", id))
}
