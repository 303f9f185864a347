package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

func newGetCommand(c *cli) *cobra.Command {
	var watchFlag, noColor bool
	cmd := &cobra.Command{
		Use:   "get NAME [--watch]",
		Short: "Show a DynamoGraphDeployment's rollout as a tree of revisions, services, workloads and pods",
		Long: "Show where a DGD's rollout stands (phase, step N/M and its kind, the split of every\n" +
			"worker service between revisions, the last verdict and value of each analysis metric)\n" +
			"and, as a tree, every worker revision that runs (stable, canary or aborted, its number,\n" +
			"worker hash and change cause), its services, their workloads (Deployments,\n" +
			"LeaderWorkerSets and their gangs, Grove PodCliques and PodCliqueScalingGroups) and\n" +
			"pods with their readiness. Revisions are grouped by the worker-hash label of what\n" +
			"runs, not by the operator's plan. On a terminal it draws symbols and colour; piped,\n" +
			"plain text. With --watch it redraws on every change it is told of by watches, until\n" +
			"interrupted.",
		Example: "  kubectl dgd get vllm-disagg\n" +
			"  kubectl dgd get vllm-disagg --watch",
		Args:              exactlyOneName,
		ValidArgsFunction: c.completeName,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := c.connect()
			if err != nil {
				return err
			}
			st := plainStyle
			if !noColor && isTerminal(c.streams.Out) {
				st = terminalStyle
			}
			g := &getter{s: s, out: c.streams.Out, style: st, now: time.Now}
			if watchFlag {
				return g.watch(cmd.Context(), args[0])
			}
			return g.once(cmd.Context(), args[0])
		},
	}
	cmd.Flags().BoolVarP(&watchFlag, "watch", "w", false, "Redraw the view on every change, until interrupted")
	cmd.Flags().BoolVar(&noColor, "no-color", false, "Plain text, even on a terminal")
	return cmd
}

// isTerminal reports whether out is a terminal that takes colour: a character device,
// TERM not "dumb", NO_COLOR (no-color.org) unset.
func isTerminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) && os.Getenv("TERM") != "dumb" && os.Getenv("NO_COLOR") == ""
}

// getter draws the view of one DGD, once or on every change.
type getter struct {
	s     *session
	out   io.Writer
	style style
	now   func() time.Time
}

// once prints the view of name.
func (g *getter) once(ctx context.Context, name string) error {
	frame, err := g.frame(ctx, name)
	if err != nil {
		return err
	}
	_, err = io.WriteString(g.out, frame)
	return err
}

// frame reads name and everything of it and draws the view.
func (g *getter) frame(ctx context.Context, name string) (string, error) {
	l, err := g.s.read(ctx, name)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	g.draw(&buf, l)
	return buf.String(), nil
}

// draw writes the header and the tree of l.
func (g *getter) draw(out io.Writer, l *live) {
	b := &builder{l: l, st: g.style, now: g.now(), revs: revisionsOf(l), label: serviceLabels(l.dgd)}
	root := b.tree()
	printFields(out, header(l, b.revs, g.style, root))
	fmt.Fprintln(out)
	g.style.printTree(out, root)
}

// watch draws the view of name, then again every time a watch reports a change to the
// DGD, its revisions, workloads or pods, until ctx ends (Ctrl-C) or the DGD is gone.
// The watches start before the first read, so no change slips between a read and its
// watch; a burst of events is drawn once, and a view equal to the last one is not drawn
// again. On a terminal each view replaces the last (the screen is cleared); otherwise
// views follow each other, a blank line apart.
func (g *getter) watch(ctx context.Context, name string) error {
	dgd, err := g.s.get(ctx, name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := g.s.watchAll(ctx, dgd)
	if err != nil {
		return err
	}
	last := ""
	for {
		frame, err := g.frame(ctx, name)
		if err != nil {
			return quiet(ctx, err)
		}
		if frame != last {
			if err := g.show(frame, last == ""); err != nil {
				return err
			}
			last = frame
		}
		select {
		case <-ctx.Done():
			return nil
		case <-events:
		}
		drain(events)
	}
}

// show writes one view of a watch.
func (g *getter) show(frame string, first bool) error {
	switch {
	case g.style.colour:
		frame = "\x1b[H\x1b[2J" + frame // cursor home, clear screen
	case !first:
		frame = "\n" + frame
	}
	_, err := io.WriteString(g.out, frame)
	return err
}

// quiet is nil when ctx ended (an interrupted watch is not an error), else err.
func quiet(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// drain takes every event already waiting, without blocking.
func drain(events <-chan struct{}) {
	for {
		select {
		case <-events:
		default:
			return
		}
	}
}

// watchAll watches every kind "get" reads, in the session's namespace: the DGD (by
// name), and the revisions, workloads and pods labelled with its name (Grove's
// PodCliqueScalingGroups, which are not, through their PodCliques and pods). Each event
// is one value on the channel; a watch the server ends is started again.
func (s *session) watchAll(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) (<-chan struct{}, error) {
	graph := client.MatchingLabels{v1alpha1.LabelGraph: dgd.Name}
	lists := map[client.ObjectList][]client.ListOption{
		&v1alpha1.DynamoGraphDeploymentList{}: {s.selector(dgd.Name)},
		&appsv1.ControllerRevisionList{}:      {client.InNamespace(s.namespace), graph},
		&appsv1.DeploymentList{}:              {client.InNamespace(s.namespace), graph},
		&corev1.PodList{}:                     {client.InNamespace(s.namespace), graph},
	}
	withLWS, withGrove := kinds(dgd)
	if withLWS {
		lists[&lwsv1.LeaderWorkerSetList{}] = []client.ListOption{client.InNamespace(s.namespace), graph}
	}
	if withGrove {
		lists[&grovev1.PodCliqueSetList{}] = []client.ListOption{client.InNamespace(s.namespace), graph}
		lists[&grovev1.PodCliqueList{}] = []client.ListOption{client.InNamespace(s.namespace), graph}
	}
	events := make(chan struct{}, 1)
	for list, opts := range lists {
		w, err := s.client.Watch(ctx, list, opts...)
		if err != nil {
			return nil, fmt.Errorf("watching %T: %w", list, err)
		}
		go s.relay(ctx, w, list, opts, events)
	}
	return events, nil
}

// relay sends one value on events for each event of w (dropped when one is already
// waiting: the reader reads everything again anyway), and starts the watch again when
// the server ends it; it stops w when ctx ends.
func (s *session) relay(ctx context.Context, w watch.Interface, list client.ObjectList, opts []client.ListOption, events chan<- struct{}) {
	for {
		select {
		case <-ctx.Done():
			w.Stop()
			return
		case _, ok := <-w.ResultChan():
			if !ok {
				w.Stop()
				var err error
				if w, err = s.client.Watch(ctx, list, opts...); err != nil {
					return // ctx ended, or the server refuses: the other watches go on
				}
			}
			select {
			case events <- struct{}{}:
			default:
			}
		}
	}
}

// header is the view's header: the DGD, its rollout's status, strategy, step and split,
// the revisions, the analysis and the replicas.
func header(l *live, revs map[string]*revision, st style, root *node) [][2]string {
	d := l.dgd
	status := st.status(root.tone, root.status)
	fields := [][2]string{{"Name:", d.Name}, {"Namespace:", d.Namespace}, {"Status:", st.paint(status.text, status.colour)}}
	ru := d.Status.RollingUpdate
	if ru != nil && ru.Reason != "" && ru.Reason != string(ru.Phase) {
		fields = append(fields, [2]string{"Reason:", ru.Reason})
	}
	if ru != nil && ru.Message != "" {
		fields = append(fields, [2]string{"Message:", ru.Message})
	}
	rollout := d.RolloutOrDefault()
	strategy := string(rollout.Strategy)
	if strategy == "" {
		strategy = string(v1alpha1.RollingUpdateStrategy)
	}
	fields = append(fields, [2]string{"Strategy:", strategy})
	if len(rollout.Steps) > 0 {
		fields = append(fields, [2]string{"  Step:", stepWithKind(d)})
	}
	for i, line := range splitLines(d, revs) {
		fields = append(fields, [2]string{map[bool]string{true: "  Split:"}[i == 0], line})
	}
	fields = append(fields, revisionFields(d, revs)...)
	for i, line := range trafficLines(d) {
		fields = append(fields, [2]string{map[bool]string{true: "Traffic:"}[i == 0], line})
	}
	for i, line := range analysisSummary(ru, len(rollout.Steps)) {
		fields = append(fields, [2]string{map[bool]string{true: "Analysis:"}[i == 0], line})
	}
	if r := d.Status.Restart; r != nil {
		fields = append(fields, [2]string{"Restart:", restartLine(r)})
	}
	return append(fields, [2]string{"Ready:", or(d.Status.Ready, none)},
		[2]string{"Replicas:", fmt.Sprintf("%d current, %d updated, %d ready (worker services)", d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas)})
}

// trafficLines say where clients enter and, per cohort (newest first), its frontends,
// routable workers and the share of the traffic asked and in effect, from
// status.traffic and status.cohorts: "revision 3: weight 30% (in effect 30%), frontends
// 1/1 ready, 4 routable workers, 2 in flight".
func trafficLines(d *v1alpha1.DynamoGraphDeployment) []string {
	t := d.Status.Traffic
	if t == nil {
		return nil
	}
	first := fmt.Sprintf("%s through %s", t.Provider, strings.Join(t.Entry, ", "))
	if !t.InEffect {
		first += ": not in effect yet: " + t.Message
	}
	lines := []string{first}
	for _, c := range d.Status.Cohorts {
		line := fmt.Sprintf("revision %d: weight %d%%", c.Revision, c.Weight)
		if c.WeightInEffect != nil {
			line += fmt.Sprintf(" (in effect %d%%)", *c.WeightInEffect)
		}
		line += fmt.Sprintf(", frontends %d/%d ready, %d routable workers", c.FrontendReadyReplicas, c.FrontendReplicas, c.RoutableWorkers)
		if !c.Routable {
			line += ", not routable"
		}
		if c.HeaderRoute {
			line += ", header route"
		}
		if c.InFlight != nil {
			line += fmt.Sprintf(", %d in flight", *c.InFlight)
		}
		if c.DrainingSince != nil {
			line += ", draining"
		}
		lines = append(lines, line)
	}
	return lines
}

// restartLine is status.restart in short: "r1 Restarting (Frontend, decode)".
func restartLine(r *v1alpha1.RestartStatus) string {
	line := fmt.Sprintf("%s %s", r.ObservedID, r.Phase)
	if len(r.InProgress) > 0 {
		line += " (" + strings.Join(r.InProgress, ", ") + ")"
	}
	return line
}

// stepWithKind is "N/M (Kind)", 1-based, from the status's step fields; "M/M (done)"
// once the steps are done.
func stepWithKind(d *v1alpha1.DynamoGraphDeployment) string {
	step := stepOf(d)
	ru := d.Status.RollingUpdate
	switch {
	case ru == nil || ru.CurrentStepIndex == nil:
		return step
	case ru.CurrentStepKind == "":
		return step + " (done)"
	}
	return fmt.Sprintf("%s (%s)", step, ru.CurrentStepKind)
}

// splitLines say, for each worker service, how its replicas split between revisions:
// "decode: 1/2 on revision 3 (canary), 1 on revision 2 (stable)", from
// status.services[].workloads (newest revision first).
func splitLines(d *v1alpha1.DynamoGraphDeployment, revs map[string]*revision) []string {
	roles := map[int64]role{}
	for _, r := range revs {
		roles[r.number] = r.role
	}
	var out []string
	for _, name := range d.WorkerServiceNames() {
		byRev := map[int64]int32{}
		for _, w := range d.Status.Services[name].Workloads {
			byRev[w.Revision] += w.Replicas
		}
		numbers := make([]int64, 0, len(byRev))
		for n := range byRev {
			numbers = append(numbers, n)
		}
		sort.Slice(numbers, func(i, j int) bool { return numbers[i] > numbers[j] })
		var parts []string
		for i, n := range numbers {
			count := strconv.Itoa(int(byRev[n]))
			if i == 0 {
				count += "/" + strconv.Itoa(int(d.Spec.Services[name].DesiredReplicas()))
			}
			part := fmt.Sprintf("%s on revision %d", count, n)
			if r := roles[n]; r != "" {
				part += " (" + string(r) + ")"
			}
			parts = append(parts, part)
		}
		if len(parts) == 0 {
			parts = []string{"no workloads"}
		}
		out = append(out, name+": "+strings.Join(parts, ", "))
	}
	return out
}

// revisionFields are the update and stable revisions, number and worker hash.
func revisionFields(d *v1alpha1.DynamoGraphDeployment, revs map[string]*revision) [][2]string {
	var out [][2]string
	if r := revs[d.Status.UpdateWorkerHash]; r != nil {
		out = append(out, [2]string{"Revision:", fmt.Sprintf("%d (%s, hash %s)", r.number, r.role, r.hash)})
	}
	for _, r := range revs {
		if r.role == roleStable && r.hash != d.Status.UpdateWorkerHash {
			out = append(out, [2]string{"Stable:", fmt.Sprintf("%d (hash %s)", r.number, r.hash)})
		}
	}
	return out
}

// analysisSummary is a line per metric of the latest analysis run: its step ("N/M",
// 1-based, of steps),
// phase, and last measurement's verdict and value.
func analysisSummary(ru *v1alpha1.RollingUpdateStatus, steps int) []string {
	if ru == nil || len(ru.Analyses) == 0 {
		return nil
	}
	run := ru.Analyses[len(ru.Analyses)-1]
	var out []string
	for _, m := range run.Metrics {
		line := fmt.Sprintf("step %d/%d %s: %s", run.Step+1, steps, m.Name, m.Phase)
		if n := len(m.Measurements); n > 0 {
			last := m.Measurements[n-1]
			line += fmt.Sprintf(", last %s", last.Phase)
			if last.Value != "" {
				line += " " + last.Value
			}
		}
		out = append(out, line)
	}
	return out
}
