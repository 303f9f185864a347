package decide_test

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/decide"
)

// tcase is one row of the golden table: one Snapshot in, its Decision out, and what
// the pass reports once execute made its writes (outcome; nil: every write made).
type tcase struct {
	name    string
	snap    *decide.Snapshot
	outcome *decide.Outcome
}

// family is a set of cases whose goldens share one file, testdata/table/<name>.golden.
type family struct {
	name  string
	cases func(t *testing.T) []tcase
}

// families are the golden table's families (table_families_test.go).
var families []family

// TestDecideTable decides every case of the golden table and compares what it prints
// (the snapshot in short, the decision and its report) with testdata/table/<family>.golden
// (go test -run TestDecideTable -update rewrites them). Then it checks that the table
// has every reason api/v1alpha1/reasons.go declares (coversReasons).
func TestDecideTable(t *testing.T) {
	seen := tableReasons(t)
	t.Run("reasons", func(t *testing.T) { coversReasons(t, seen) })
}

// tableReasons runs the whole table (comparing every golden) and returns the reasons
// its decisions and reports carry.
func tableReasons(t *testing.T) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			var b strings.Builder
			names := map[string]bool{}
			for _, c := range f.cases(t) {
				if names[c.name] {
					t.Fatalf("two cases named %s", c.name)
				}
				names[c.name] = true
				fmt.Fprintf(&b, "=== %s\n", c.name)
				printCase(&b, c, seen)
				b.WriteString("\n")
			}
			compareGolden(t, filepath.Join("testdata", "table", f.name+".golden"), b.String())
		})
	}
	return seen
}

// compareGolden compares text with the golden file (or rewrites it with -update).
func compareGolden(t *testing.T, file, text string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if diff := cmp.Diff(string(want), text); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", file, diff)
	}
}

// printCase prints a case: its snapshot, its decision, and the report of its outcome.
func printCase(b *strings.Builder, c tcase, seen map[string]bool) {
	s := c.snap
	d := decide.Decide(s)
	if len(d.Needs.Holders) > 0 {
		// What holds each name the writes create objects under, read as the reconciler
		// does: nothing, unless the case put someone else's object there.
		for _, n := range d.Needs.Holders {
			if _, ok := s.Holders[n.ObjectName]; !ok {
				if s.Holders == nil {
					s.Holders = map[decide.ObjectName]decide.Holder{}
				}
				s.Holders[n.ObjectName] = decide.Holder{}
			}
		}
		d = decide.Decide(s)
	}
	printSnapshot(b, s)
	b.WriteString("decision:\n")
	switch {
	case d.Wait != "":
		fmt.Fprintf(b, "  wait for %s\n", d.Wait)
	case d.Needs.Any():
		printNeeds(b, d.Needs)
	}
	if d.Err != nil {
		fmt.Fprintf(b, "  error: %v\n", d.Err)
	}
	for _, m := range d.Measure {
		fmt.Fprintf(b, "  measurement due: step %d metric %s #%d: %s\n", m.Step, m.Metric, m.Index, m.Query)
	}
	for _, w := range d.Writes {
		fmt.Fprintf(b, "  write %s\n", w)
		if w.Op == decide.AnnounceStatus {
			printConditions(b, "    ", w.Status, seen)
		}
	}
	if d.Metrics.Step || d.Metrics.RevisionsKept >= 0 {
		fmt.Fprintf(b, "  metrics: step %v, revisions kept %d\n", d.Metrics.Step, d.Metrics.RevisionsKept)
	}
	for _, m := range d.Measured {
		fmt.Fprintf(b, "  measured %s: %s %q %s\n", m.Metric, m.Measurement.Phase, m.Measurement.Value, m.Measurement.Message)
	}
	if d.Status != nil {
		printStatus(b, d.Status, seen)
	}
	out := c.outcome
	if out == nil {
		out = madeAll(d)
	} else {
		fmt.Fprintf(b, "outcome: %s\n", showOutcome(*out))
	}
	rep := d.Conclude(*out)
	b.WriteString("report:\n")
	if rep.Status != nil && (d.Status == nil || !equality.Semantic.DeepEqual(rep.Status, d.Status)) {
		b.WriteString("  status differs from the decision's:\n")
		printConditions(b, "    ", rep.Status, seen)
	}
	for _, e := range rep.Events {
		seen[e.Reason] = true
		fmt.Fprintf(b, "  event %s %s: %s\n", e.Type, e.Reason, e.Message)
	}
	if rep.Requeue > 0 {
		fmt.Fprintf(b, "  requeue %s\n", rep.Requeue)
	}
	if rep.Status == nil {
		b.WriteString("  no status write\n")
	}
}

// madeAll is the outcome of a decision whose every write was made (as execute says
// it: the Say of workload writes as progress, of the others as objects).
func madeAll(d decide.Decision) *decide.Outcome {
	out := &decide.Outcome{}
	for _, w := range d.Writes {
		if w.Progress {
			out.Progress = append(out.Progress, w.Say...)
		} else {
			out.Objects = append(out.Objects, w.Say...)
		}
	}
	return out
}

func showOutcome(o decide.Outcome) string {
	var parts []string
	if len(o.Progress)+len(o.Objects) > 0 {
		parts = append(parts, fmt.Sprintf("made %q", append(append([]string(nil), o.Progress...), o.Objects...)))
	}
	for _, c := range o.Conflicts {
		parts = append(parts, "conflict: "+c.Error())
	}
	if o.Stopped != nil {
		parts = append(parts, "stopped: "+o.Stopped.Error())
	}
	if o.Collided != nil {
		parts = append(parts, fmt.Sprintf("collided at %d", *o.Collided))
	}
	if o.Refused != nil {
		parts = append(parts, "refused: "+o.Refused.Error())
	}
	if o.Err != nil {
		parts = append(parts, "error: "+o.Err.Error())
	}
	return strings.Join(parts, "; ")
}

func printNeeds(b *strings.Builder, n decide.Needs) {
	for _, nn := range n.Names {
		fmt.Fprintf(b, "  needs the name of %s %s/%s\n", nn.Backend, nn.Key.Service, nn.Key.Hash)
	}
	if n.Unscheduled {
		b.WriteString("  needs the unscheduled pods\n")
	}
	for _, h := range n.Holders {
		fmt.Fprintf(b, "  needs what holds %s %s\n", h.Kind, h.Name)
	}
}

// rel is a time as an offset from t0.
func rel(t time.Time) string {
	return "+" + t.Sub(t0).String()
}

func relp(t *metav1.Time) string {
	if t == nil {
		return "-"
	}
	return rel(t.Time)
}

// printSnapshot prints what a case decides from: the spec in short, the history, the
// workloads, the status before, and the rest of the snapshot when set.
func printSnapshot(b *strings.Builder, s *decide.Snapshot) {
	dgd := s.DGD
	fmt.Fprintf(b, "snapshot at %s, generation %d:\n", rel(s.Now), dgd.Generation)
	b.WriteString("  spec:")
	for _, name := range dgd.ServiceNames() {
		svc := dgd.Spec.Services[name]
		fmt.Fprintf(b, " %s=%d", name, svc.DesiredReplicas())
		if svc.IsMultinode() {
			fmt.Fprintf(b, "x%d", svc.Multinode.NodeCount)
		}
		if svc.ExtraPodSpec != nil && svc.ExtraPodSpec.MainContainer != nil {
			fmt.Fprintf(b, "(%s)", strings.TrimPrefix(svc.ExtraPodSpec.MainContainer.Image, "nvcr.io/nvidia/ai-dynamo/"))
		}
		for _, k := range sortedStrings(svc.Annotations) {
			fmt.Fprintf(b, "[%s=%s]", strings.TrimPrefix(k, "nvidia.com/"), svc.Annotations[k])
		}
	}
	b.WriteString("\n")
	fmt.Fprintf(b, "  rollout: %s\n", showRollout(dgd))
	if dgd.Spec.Restart != nil {
		fmt.Fprintf(b, "  spec.restart: %s\n", dgd.Spec.Restart.Raw)
	}
	for _, k := range sortedStrings(dgd.Annotations) {
		fmt.Fprintf(b, "  annotation %s=%s\n", k, dgd.Annotations[k])
	}
	for _, r := range s.Revisions {
		fmt.Fprintf(b, "  revision #%d %s workers %s\n", r.Revision, r.Name, r.Labels[v1alpha1.LabelWorkerHash])
	}
	for _, w := range s.Workloads {
		fmt.Fprintf(b, "  workload %s %s: replicas %d ready %d updated %d current %d pods %d", w.Backend, w.Name, w.Replicas, w.Ready, w.Updated, w.Current, w.Pods)
		for _, f := range []struct {
			on   bool
			name string
		}{{w.Terminating, "terminating"}, {w.Outdated, "outdated"}, {w.Relabel != nil, "labels stripped"}} {
			if f.on {
				b.WriteString(", " + f.name)
			}
		}
		if w.Group != nil {
			fmt.Fprintf(b, ", in %s", w.Group)
		}
		b.WriteString("\n")
	}
	for _, key := range sortedStrings(s.Objects.Named) {
		o := s.Objects.Named[key]
		fmt.Fprintf(b, "  object %s owned by %s\n", key, owners(o.GetOwnerReferences()))
	}
	for _, svc := range s.Objects.Services {
		if len(svc.OwnerReferences) == 0 || svc.OwnerReferences[0].UID != dgd.UID {
			fmt.Fprintf(b, "  service %s owned by %s\n", svc.Name, owners(svc.OwnerReferences))
		}
	}
	for _, n := range sortedHolders(s.Holders) {
		if h := s.Holders[n]; h.Exists && (h.Controller == nil || h.Controller.UID != dgd.UID) {
			fmt.Fprintf(b, "  name %s %s held by %s\n", n.Kind, n.Name, owners(controllerRefs(h)))
		}
	}
	if s.Stale != "" {
		fmt.Fprintf(b, "  stale: %s\n", s.Stale)
	}
	var ms []decide.Measure
	for m := range s.Measurements {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool {
		return ms[i].Step < ms[j].Step || ms[i].Step == ms[j].Step && ms[i].Metric < ms[j].Metric
	})
	for _, m := range ms {
		r := s.Measurements[m]
		if r.Err != nil {
			fmt.Fprintf(b, "  measurement step %d %s: error %v\n", m.Step, m.Metric, r.Err)
		} else {
			fmt.Fprintf(b, "  measurement step %d %s: %g\n", m.Step, m.Metric, r.Value)
		}
	}
	if s.CanListUnscheduled {
		fmt.Fprintf(b, "  unscheduled listed %v:", s.UnscheduledListed)
		for _, p := range s.Unscheduled {
			fmt.Fprintf(b, " [%s/%s %s]", p.Service, p.Hash, p.Message)
		}
		b.WriteString("\n")
	}
	b.WriteString("  status before: ")
	b.WriteString(showStatusBefore(dgd.Status))
	b.WriteString("\n")
}

func owners(refs []metav1.OwnerReference) string {
	var out []string
	for _, r := range refs {
		c := ""
		if r.Controller != nil && *r.Controller {
			c = " (controller)"
		}
		out = append(out, r.Kind+" "+r.Name+c)
	}
	if len(out) == 0 {
		return "nobody"
	}
	return strings.Join(out, ", ")
}

func showRollout(dgd *v1alpha1.DynamoGraphDeployment) string {
	ro := dgd.RolloutOrDefault()
	out := fmt.Sprintf("%s surge %s unavailable %s", ro.Strategy, ro.MaxSurge.String(), ro.MaxUnavailable.String())
	if ro.Partition != nil {
		out += " partition " + ro.Partition.String()
	}
	if ro.Paused {
		out += " paused"
	}
	if *ro.ProgressDeadlineSeconds != v1alpha1.DefaultProgressDeadlineSeconds {
		out += fmt.Sprintf(" deadline %ds", *ro.ProgressDeadlineSeconds)
	}
	if dgd.Spec.RevisionHistoryLimit != nil {
		out += fmt.Sprintf(" history %d", *dgd.Spec.RevisionHistoryLimit)
	}
	if dgd.Spec.Backend != "" {
		out += " backend " + string(dgd.Spec.Backend)
	}
	for i, st := range ro.Steps {
		out += fmt.Sprintf("; step %d %s", i+1, showStep(st))
	}
	return out
}

func showStep(st v1alpha1.RolloutStep) string {
	switch {
	case st.Partition != nil:
		return "partition " + st.Partition.String()
	case st.Pause != nil && st.Pause.Duration != nil:
		return "pause " + st.Pause.Duration.Duration.String()
	case st.Pause != nil:
		return "pause"
	case st.Analysis != nil:
		var ms []string
		for _, m := range st.Analysis.Metrics {
			ms = append(ms, fmt.Sprintf("%s{%s success %q failure %q}", m.Name, m.Query, m.SuccessCondition, m.FailureCondition))
		}
		return "analysis " + strings.Join(ms, " ")
	}
	return "empty"
}

func showStatusBefore(st v1alpha1.DynamoGraphDeploymentStatus) string {
	if st.ObservedGeneration == 0 && st.RollingUpdate == nil && len(st.Conditions) == 0 {
		return "none"
	}
	out := fmt.Sprintf("generation %d, %s", st.ObservedGeneration, summary(st))
	if ru := st.RollingUpdate; ru != nil {
		if ru.CurrentStepIndex != nil {
			out += fmt.Sprintf(", step %d %s", *ru.CurrentStepIndex, ru.CurrentStepKind)
		}
		if ru.Attempt > 0 {
			out += fmt.Sprintf(", attempt %d", ru.Attempt)
		}
		if ru.Abort != nil {
			out += ", aborted " + ru.Abort.Reason
		}
		out += ", last progress " + relp(ru.LastProgressTime)
	}
	return out
}

func printConditions(b *strings.Builder, indent string, st *v1alpha1.DynamoGraphDeploymentStatus, seen map[string]bool) {
	conds := slices.Clone(st.Conditions)
	sort.Slice(conds, func(i, j int) bool { return conds[i].Type < conds[j].Type })
	for _, c := range conds {
		seen[c.Reason] = true
		fmt.Fprintf(b, "%s%s %s %s (since %s, generation %d): %s\n", indent, c.Type, c.Status, c.Reason, rel(c.LastTransitionTime.Time), c.ObservedGeneration, c.Message)
	}
}

// printStatus prints a status: revisions and counts, the rolling update, the
// conditions.
func printStatus(b *strings.Builder, st *v1alpha1.DynamoGraphDeploymentStatus, seen map[string]bool) {
	fmt.Fprintf(b, "  status: generation %d, current %s, update #%d %s (%s), collisions %d, ready %s, workers ready %d of %d, updated %d, updated ready %d\n",
		st.ObservedGeneration, st.CurrentRevision, st.UpdateRevisionNumber, st.UpdateRevision, st.UpdateWorkerHash, ptrVal(st.CollisionCount),
		st.Ready, st.ReadyReplicas, st.Replicas, st.UpdatedReplicas, st.UpdatedReadyReplicas)
	for _, name := range sortedStrings(st.Services) {
		ss := st.Services[name]
		fmt.Fprintf(b, "    %s %s: replicas %d ready %d updated %d available %d namespaces %v", name, ss.WorkloadKind, ss.Replicas, ss.ReadyReplicas, ss.UpdatedReplicas, ss.AvailableReplicas, ss.RuntimeNamespaces)
		for _, w := range ss.Workloads {
			fmt.Fprintf(b, " [%s #%d %d/%d]", w.Name, w.Revision, w.ReadyReplicas, w.Replicas)
		}
		if ss.Message != "" {
			fmt.Fprintf(b, " message %q", ss.Message)
		}
		b.WriteString("\n")
	}
	if ru := st.RollingUpdate; ru != nil {
		seen[ru.Reason] = true
		fmt.Fprintf(b, "  rollingUpdate: %s %s: %s\n", ru.Phase, ru.Reason, ru.Message)
		fmt.Fprintf(b, "    start %s, last progress %s, end %s, updated services %v, attempt %d\n",
			relp(ru.StartTime), relp(ru.LastProgressTime), relp(ru.EndTime), ru.UpdatedServices, ru.Attempt)
		if ru.CurrentStepIndex != nil {
			fmt.Fprintf(b, "    step index %d kind %q started %s ends %s\n", *ru.CurrentStepIndex, ru.CurrentStepKind, relp(ru.CurrentStepStartTime), relp(ru.CurrentStepEndTime))
		}
		if a := ru.Abort; a != nil {
			seen[a.Reason] = true
			fmt.Fprintf(b, "    abort %s at %s to #%d %s: %s\n", a.Reason, rel(a.Time.Time), a.StableRevisionNumber, a.StableRevision, a.Message)
		}
		for _, an := range ru.Analyses {
			fmt.Fprintf(b, "    analysis of step %d: %s %q\n", an.Step, an.Phase, an.Message)
			for _, m := range an.Metrics {
				fmt.Fprintf(b, "      metric %s %s: successful %d failed %d inconclusive %d errors %d (consecutive %d), %d measurements %q\n",
					m.Name, m.Phase, m.Successful, m.Failed, m.Inconclusive, m.Error, m.ConsecutiveError, len(m.Measurements), m.Message)
			}
		}
	}
	if r := st.Restart; r != nil {
		fmt.Fprintf(b, "  restart: %s id %q revision %s in progress %v: %s\n", r.Phase, r.ObservedID, r.Revision, r.InProgress, r.Message)
	}
	printConditions(b, "  ", st, seen)
}

func ptrVal(p *int32) int32 {
	if p == nil {
		return -1
	}
	return *p
}

func sortedStrings[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// coversReasons fails when a reason of api/v1alpha1/reasons.go (a condition's or
// status.rollingUpdate's, or an Event's) appears in no golden of the table (seen):
// every constant there, read from the file itself, so a reason added later needs a
// case; notDecided lists those Decide never produces, with why. It also fails on a
// reason the table has that reasons.go does not declare (but those of undeclared).
func coversReasons(t *testing.T, seen map[string]bool) {
	declared := map[string]bool{}
	for name, value := range reasonConstants(t) {
		declared[value] = true
		if why, ok := notDecided[name]; ok {
			if seen[value] {
				t.Errorf("%s (%s) is listed as never decided (%s), but the table has it", name, value, why)
			}
			continue
		}
		if !seen[value] {
			t.Errorf("no golden of the table has %s (%q): add a case", name, value)
		}
	}
	for _, r := range sortedStrings(seen) {
		if !declared[r] && !undeclared[r] {
			t.Errorf("the table has reason %q, which reasons.go does not declare", r)
		}
	}
}

// undeclared are reasons Decide produces that reasons.go does not declare: none (the
// table found two, the phase Event of a hold at an analysis step, "Rollout" + its
// reason: RolloutAnalysisRunning is now declared, and an inconclusive analysis no longer
// says in a Normal Event what its Warning says).
var undeclared = map[string]bool{}

// notDecided are the reasons of reasons.go no Decision or Report carries, by constant
// name, and why. None today: those that only a write's outcome produces (NameConflict
// from a workload name someone holds, InvalidSpec from a spec a backend refuses) are
// reached through Decision.Conclude with an Outcome (the conflicts family).
var notDecided = map[string]string{
	"ReasonObserveFailed": "a read of the pass failed before any Snapshot: the reconciler reports it (decide.HaltedStatus; controllers' observeFailed, tested there)",
}

// reasonConstants are the exported constants of api/v1alpha1/reasons.go, by name,
// with their values (type-checked, so "Rollout" + ReasonPartitioned is its value).
func reasonConstants(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join("..", "..", "api", "v1alpha1", "reasons.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := new(types.Config).Check("v1alpha1", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, name := range pkg.Scope().Names() {
		if c, ok := pkg.Scope().Lookup(name).(*types.Const); ok && c.Exported() {
			out[name] = constant.StringVal(c.Val())
		}
	}
	if len(out) < 30 {
		t.Fatalf("only %d constants in reasons.go", len(out))
	}
	return out
}

func sortedHolders(m map[decide.ObjectName]decide.Holder) []decide.ObjectName {
	var out []decide.ObjectName
	for n := range m {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind+"/"+out[i].Name < out[j].Kind+"/"+out[j].Name })
	return out
}

func controllerRefs(h decide.Holder) []metav1.OwnerReference {
	if h.Controller == nil {
		return nil
	}
	return []metav1.OwnerReference{*h.Controller}
}
