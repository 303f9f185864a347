package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

// warningRestartIgnored is printed after every restart: this operator keeps spec.restart
// (it converts it between versions) but does not act on it.
const warningRestartIgnored = "Warning: this operator does not act on spec.restart yet: no pod is restarted. " +
	"To replace every worker pod, roll out a new revision (for example \"kubectl dgd set image\").\n"

func newRestartCommand(c *cli) *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "restart NAME [--id=ID]",
		Short: "Request a restart of a DynamoGraphDeployment (Dynamo's spec.restart)",
		Long: "Set spec.restart.id to a new value (by default the current time, RFC 3339), Dynamo's way\n" +
			"to ask for a restart of every component: Dynamo's operator restarts them when the id\n" +
			"changes (spec.restart.strategy, kept as it is, orders them). This operator does not act\n" +
			"on spec.restart yet: it stores and converts the field, and restarts nothing. The command\n" +
			"exists so that a graph moved from Dynamo's operator keeps its workflow; it says so on\n" +
			"every run.",
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
			if err := s.restart(cmd.Context(), c.streams.Out, args[0], id); err != nil {
				return err
			}
			_, err = fmt.Fprint(c.streams.ErrOut, warningRestartIgnored)
			return err
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
