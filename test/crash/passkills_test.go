//go:build linux

package crash

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/harness"
)

// passKiller kills the operator inside one pass, after the j-th API write request of a
// pass whose Decision has a given shape. The operator runs at --zap-log-level=debug and
// logs each pass's Decision.Writes ("executing", controllers/pass.go) before making
// them; the proxy (writeProxy) sees the write requests that follow, in the followed
// namespace, and attributes them to the last such pass. A pass's shape is its writes
// with revision hashes and numbers blanked (shapeOf), so the same decision at the next
// revision has the same shape.
//
// Positions are counted in API requests, not in Decision.Writes: a write that finds
// nothing to do (an Ensure of a workload that exists, a create that finds its object)
// sends none, and a crash right after it is the same crash as right after the request
// before it. A pass of m requests before its status write has m kill positions: after
// request j for j = 1..m (after the m-th: every write made, the status not).
type passKiller struct {
	t       *testing.T
	e       *env
	px      *writeProxy
	logPath string

	mu      sync.Mutex
	op      *operator
	s       *scenario // the followed DGD (set by attach)
	ns      string
	logOff  int64
	partial []byte
	cur     *passRecord   // the pass whose requests arrive now
	passes  []*passRecord // the passes since begin, in order
	// targets are the positions still to kill at, by shape (ascending); killed marks
	// the shapes killed at in the current transition (one kill per shape each).
	targets map[string][]int
	killed  map[string]bool
	pending *passKill
	kills   []passKill
	// check adds the case's own checks of the state a kill left (beside ownership).
	check    func(*scenario, *world) []string
	problems []string
}

type passRecord struct {
	shape  string
	writes []string
	reqs   []string
}

// positions is the number of requests before the pass's own status write.
func (p *passRecord) positions() int {
	n := len(p.reqs)
	if n > 0 && isStatusWrite(p.reqs[n-1]) {
		n--
	}
	return n
}

type passKill struct {
	shape  string
	at     int
	req    string
	writes []string
}

func isStatusWrite(req string) bool {
	return strings.Contains(req, "/dynamographdeployments/") && strings.HasSuffix(req, "/status")
}

// namespaceOf is the namespace of a request ("PUT /apis/apps/v1/namespaces/x/...").
func namespaceOf(req string) string {
	_, rest, ok := strings.Cut(req, "/namespaces/")
	if !ok {
		return ""
	}
	ns, _, _ := strings.Cut(rest, "/")
	return ns
}

var (
	hashRE   = regexp.MustCompile(`\b[0-9a-f]{8}\b`)
	numberRE = regexp.MustCompile(`#[0-9]+`)
)

// shapeOf is a pass's writes with hashes and revision numbers blanked.
func shapeOf(writes []string) string {
	out := make([]string, len(writes))
	for i, w := range writes {
		out[i] = numberRE.ReplaceAllString(hashRE.ReplaceAllString(w, "H"), "#N")
	}
	return strings.Join(out, "; ")
}

func newPassKiller(t *testing.T, e *env) *passKiller {
	k := &passKiller{t: t, e: e, px: startWriteProxy(t, e), logPath: filepath.Join(e.dir, "passkills-operator.log")}
	k.px.set(k.afterWrite, k.kill)
	k.start()
	t.Cleanup(func() {
		k.mu.Lock()
		op := k.op
		k.mu.Unlock()
		op.kill()
	})
	return k
}

func (k *passKiller) start() {
	o, err := k.e.startOperatorWith(k.px.kubeconfig, "dgd-operator", k.logPath, "--leader-elect=false", "--zap-log-level=debug")
	if err != nil {
		k.t.Fatal(err)
	}
	k.mu.Lock()
	k.op = o
	k.mu.Unlock()
}

// attach follows a scenario's DGD (hooks.watching: before the DGD is created).
func (k *passKiller) attach(s *scenario) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.readLog()
	k.s, k.ns, k.cur = s, s.ns, nil
}

// begin starts a transition: the passes recorded so far are dropped and every shape
// may be killed at once more.
func (k *passKiller) begin() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.readLog()
	k.passes, k.killed = nil, map[string]bool{}
}

// recorded returns the passes since begin.
func (k *passKiller) recorded() []*passRecord {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]*passRecord(nil), k.passes...)
}

func (k *passKiller) arm(targets map[string][]int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.targets = targets
}

// afterWrite is the proxy's hook: it attributes a write request of the followed
// namespace to the pass logged last and says whether to kill after it.
func (k *passKiller) afterWrite(_ int, req string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ns == "" || namespaceOf(req) != k.ns {
		return false
	}
	k.readLog()
	if k.cur == nil {
		// A request before the pass's log line: never expected (the line is written
		// before the writes); recorded under its own shape so that it shows.
		k.cur = &passRecord{shape: "(no pass logged)"}
		k.passes = append(k.passes, k.cur)
	}
	p := k.cur
	p.reqs = append(p.reqs, req)
	j := len(p.reqs)
	pos := k.targets[p.shape]
	if len(pos) == 0 || pos[0] != j || k.killed[p.shape] {
		return false
	}
	k.targets[p.shape] = pos[1:]
	k.killed[p.shape] = true
	k.pending = &passKill{shape: p.shape, at: j, req: req, writes: p.writes}
	return true
}

// kill is the proxy's kill: SIGKILL (the write applied, its response not sent), check
// what the crash left, restart the operator.
func (k *passKiller) kill() {
	k.mu.Lock()
	op, s, pk, check := k.op, k.s, k.pending, k.check
	k.mu.Unlock()
	op.kill()
	k.mu.Lock()
	k.readLog() // the dead operator's last lines
	k.cur, k.pending = nil, nil
	k.kills = append(k.kills, *pk)
	k.mu.Unlock()
	appendLog(k.logPath, "SIGKILL after request %d of a pass (%s): %s", pk.at, pk.req, pk.shape)
	var problems []string
	if w, err := s.read(); err != nil {
		problems = append(problems, err.Error())
	} else {
		problems = append(problems, s.ownershipProblems(w)...)
		if check != nil {
			problems = append(problems, check(s, w)...)
		}
		if len(problems) > 0 {
			problems = append(problems, s.context(w))
		}
	}
	if len(problems) > 0 {
		k.mu.Lock()
		k.problems = append(k.problems, fmt.Sprintf("killed after request %d (%s) of the pass %q: %s",
			pk.at, pk.req, pk.shape, strings.Join(problems, "; ")))
		k.mu.Unlock()
	}
	time.Sleep(200 * time.Millisecond)
	k.start()
}

// failures returns the problems the kills left, and whether the operator exited by
// itself.
func (k *passKiller) failures() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := append([]string(nil), k.problems...)
	if !k.op.alive() && !k.op.killed.Load() {
		out = append(out, "the operator exited by itself: "+k.op.exitStatus()+"\n"+tailLog(k.logPath, 30))
	}
	return out
}

// readLog reads the operator log's new lines: each "executing" line of the followed
// namespace starts a pass. Called with mu held.
func (k *passKiller) readLog() {
	f, err := os.Open(k.logPath)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(k.logOff, io.SeekStart); err != nil {
		return
	}
	b, _ := io.ReadAll(f)
	k.logOff += int64(len(b))
	b = append(k.partial, b...)
	last := bytes.LastIndexByte(b, '\n')
	k.partial = append([]byte(nil), b[last+1:]...)
	if last < 0 {
		return
	}
	for _, line := range bytes.Split(b[:last], []byte{'\n'}) {
		if !bytes.Contains(line, []byte(`"msg":"executing"`)) {
			continue
		}
		var l struct {
			Namespace string   `json:"namespace"`
			Writes    []string `json:"writes"`
		}
		if json.Unmarshal(line, &l) != nil || l.Namespace != k.ns {
			continue
		}
		k.cur = &passRecord{shape: shapeOf(l.Writes), writes: l.Writes}
		k.passes = append(k.passes, k.cur)
	}
}

// describe is the operator log's tail for failure messages.
func (k *passKiller) describe() string {
	return "  operator log tail:\n" + indent(tailLog(k.logPath, 20))
}

// passCase is one kind of transition killed inside its passes.
type passCase struct {
	name string
	// start creates the case's DGD (rolled out, the killer attached); transition makes
	// the i-th change (i from 1) and waits until it settled. fresh cases start a new
	// DGD in every transition (first deploy).
	start      func(k *passKiller) *scenario
	transition func(k *passKiller, s *scenario, i int) *scenario
	// ci picks the passes a CI run kills in, by their index among the reference run's
	// writing passes; nil: none, the case runs only under CRASH_ALL=1, which kills in
	// every writing pass of every case.
	ci func(writing []*passRecord) []int
	// check is run on the state every kill leaves, beside ownership.
	check func(*scenario, *world) []string
}

// passCoverage is what one case covered.
type passCoverage struct {
	name        string
	passes      []*passRecord // the reference run's writing passes
	positions   int           // targeted
	killed      int
	transitions int
	missed      []passKill // positions never met (shape, at)
	took        time.Duration
}

// runPassCase rolls the case's DGD once without kills (the reference: which passes
// the transition makes, with how many requests each), then repeats the transition,
// killing in each at the smallest position still to cover of every targeted pass
// shape it meets, until every position was killed at or the transitions run out.
func runPassCase(t *testing.T, k *passKiller, c passCase, all bool) passCoverage {
	begin := time.Now()
	cov := passCoverage{name: c.name}
	k.mu.Lock()
	k.check = c.check
	k.mu.Unlock()
	k.arm(nil)
	s := c.start(k)
	i := 1
	k.begin()
	s = c.transition(k, s, i)
	for _, p := range k.recorded() {
		if p.positions() > 0 {
			cov.passes = append(cov.passes, p)
		}
	}
	if len(cov.passes) == 0 {
		t.Fatalf("%s: the reference transition made no write", c.name)
	}
	var picked []int
	if c.ci != nil {
		picked = c.ci(cov.passes)
	}
	if all {
		picked = picked[:0]
		for j := range cov.passes {
			picked = append(picked, j)
		}
	}
	targets := map[string][]int{}
	for _, j := range picked {
		p := cov.passes[j]
		if n := len(targets[p.shape]); n < p.positions() {
			for pos := n + 1; pos <= p.positions(); pos++ {
				targets[p.shape] = append(targets[p.shape], pos)
			}
		}
	}
	for _, pos := range targets {
		cov.positions += len(pos)
	}
	k.arm(targets)
	// A shape's positions take one transition each; a pass shaped by readiness timing
	// (a step, the cleanup) does not recur in every transition: as many tries again,
	// and two more.
	most := 0
	for _, pos := range targets {
		most = max(most, len(pos))
	}
	for tries := 2*most + 2; tries > 0 && remaining(k) > 0; tries-- {
		i++
		k.begin()
		s = c.transition(k, s, i)
		cov.transitions++
		if f := k.failures(); len(f) > 0 {
			t.Fatalf("%s, transition %d:\n  %s", c.name, i, strings.Join(f, "\n  "))
		}
	}
	k.mu.Lock()
	for shape, pos := range k.targets {
		for _, p := range pos {
			cov.missed = append(cov.missed, passKill{shape: shape, at: p})
		}
	}
	k.mu.Unlock()
	sort.Slice(cov.missed, func(i, j int) bool {
		a, b := cov.missed[i], cov.missed[j]
		return a.shape < b.shape || a.shape == b.shape && a.at < b.at
	})
	cov.killed = cov.positions - len(cov.missed)
	k.arm(nil)
	if v := s.w.Violations(); len(v) > 0 {
		t.Fatalf("%s: invariant violations: %s", c.name, strings.Join(v, "; "))
	}
	cov.took = time.Since(begin)
	return cov
}

func remaining(k *passKiller) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, pos := range k.targets {
		n += len(pos)
	}
	return n
}

func (c passCoverage) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d of %d positions killed at in %d transitions (%s); the reference transition's writing passes:",
		c.name, c.killed, c.positions, c.transitions, c.took.Round(time.Second))
	for i, p := range c.passes {
		fmt.Fprintf(&b, "\n    pass %d, %d requests before its status: %s", i+1, p.positions(), strings.Join(p.writes, "; "))
	}
	for _, m := range c.missed {
		fmt.Fprintf(&b, "\n    missed: after request %d of %q", m.at, m.shape)
	}
	return b.String()
}

// everyPass picks every writing pass; firstPass the first (of a new revision, of a
// scale).
func everyPass(writing []*passRecord) []int {
	out := make([]int, len(writing))
	for i := range out {
		out[i] = i
	}
	return out
}

func firstPass([]*passRecord) []int { return []int{0} }

// hooks are those of a scenario a passKiller follows.
func (k *passKiller) hooks() hooks {
	return hooks{watching: k.attach, describe: k.describe}
}

// recreateReady checks ROLLOUT.md's Recreate announcement on the state a kill left:
// while Ready is True, some one worker revision's live workloads hold every worker
// service's replicas (the operator writes Ready False before the first write that
// takes the running revision's pods away, decide.AnnounceStatus).
func recreateReady(s *scenario, w *world) []string {
	c := meta.FindStatusCondition(w.d.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	held := map[string]map[string]int32{} // worker hash -> service -> replicas
	add := func(o metav1.Object, replicas *int32) {
		h := o.GetLabels()[v1alpha1.LabelWorkerHash]
		if h == "" || !o.GetDeletionTimestamp().IsZero() {
			return
		}
		if held[h] == nil {
			held[h] = map[string]int32{}
		}
		held[h][o.GetLabels()[v1alpha1.LabelService]] += ptr.Deref(replicas, 1)
	}
	for i := range w.deps {
		add(&w.deps[i], w.deps[i].Spec.Replicas)
	}
	for i := range w.lwss {
		add(&w.lwss[i], w.lwss[i].Spec.Replicas)
	}
	for _, bySvc := range held {
		full := true
		for _, name := range w.d.WorkerServiceNames() {
			full = full && bySvc[name] >= w.d.Spec.Services[name].DesiredReplicas()
		}
		if full {
			return nil
		}
	}
	return []string{fmt.Sprintf("Recreate: Ready is True (%s) while no worker revision holds every worker service's replicas (live %v)", c.Reason, held)}
}

// imageChange is a transition: a new worker image, rolled out and settled.
func imageChange(_ *passKiller, s *scenario, i int) *scenario {
	img := fmt.Sprintf("vllm:t%d", i)
	s.update("image →"+img, func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, img) })
	s.converge(img)
	return s
}

// startRolled creates a case's DGD with a history of one old revision, and rolls it to
// its second revision without kills, so that from the reference transition on every
// completed rollout deletes the oldest revision (the cleanup pass).
func startRolled(obj *v1alpha1.DynamoGraphDeployment) func(*passKiller) *scenario {
	return func(k *passKiller) *scenario {
		obj.Spec.RevisionHistoryLimit = ptr.To[int32](1)
		s := newScenario(k.t, k.e, obj, k.hooks())
		return imageChange(k, s, 0)
	}
}

// passCases are the transitions TestKillInsidePasses kills inside.
func passCases() []passCase {
	return []passCase{{
		// A rolling update with surge: the first pass of a new revision, the steps, the
		// cleanup that deletes the old revision's workloads and its ControllerRevision.
		name:       "surge",
		start:      startRolled(disagg("pk-surge", "pd21", 2, 1, "vllm:t-1")),
		transition: imageChange,
		ci:         everyPass,
	}, {
		// Recreate: the announcement (Ready False) and the scale-down in one pass.
		name: "recreate",
		start: startRolled(harness.NewDGD("pk-recreate", "rc").Disagg(2, 1, "vllm:t-1").
			Strategy(v1alpha1.RecreateStrategy).Obj()),
		transition: imageChange,
		ci:         firstPass,
		check:      recreateReady,
	}, {
		// A scale up then down (prefill and decode at their ratio), no new revision.
		// maxUnavailable 100%: the watcher's availability floor is R - maxUnavailable of
		// the new R, which no scale-up meets until its pods are ready; prefill with
		// decode, surge, orphans and ownership are checked as elsewhere.
		name: "scale",
		start: func(k *passKiller) *scenario {
			obj := harness.NewDGD("pk-scale", "pd21").Disagg(2, 1, "vllm:v0").Rollout("1", "100%").Obj()
			return newScenario(k.t, k.e, obj, k.hooks())
		},
		transition: func(_ *passKiller, s *scenario, i int) *scenario {
			for _, r := range [][2]int32{{4, 2}, {2, 1}} {
				s.update(fmt.Sprintf("scale to P=%d/D=%d", r[0], r[1]), func(d *v1alpha1.DynamoGraphDeployment) {
					d.Spec.Services["prefill"].Replicas, d.Spec.Services["decode"].Replicas = ptr.To(r[0]), ptr.To(r[1])
				})
				s.converge(fmt.Sprintf("P=%d/D=%d (%d)", r[0], r[1], i))
			}
			return s
		},
		ci: everyPass,
	}, {
		// Multinode gangs on real LeaderWorkerSets (CRASH_ALL=1 only).
		name: "lws",
		start: startRolled(harness.NewDGD("pk-lws", "gangs").Disagg(2, 1, "vllm:t-1").
			Multinode("prefill", 2).Multinode("decode", 2).Rollout("1", "0").Obj()),
		transition: imageChange,
	}, {
		// First deploy: every transition is a new DGD in its own namespace (CRASH_ALL=1
		// only).
		name:  "first-deploy",
		start: func(*passKiller) *scenario { return nil },
		transition: func(k *passKiller, _ *scenario, i int) *scenario {
			return newScenario(k.t, k.e, disagg(fmt.Sprintf("pk-first-%d", i), "pd21", 2, 1, "vllm:v0"), k.hooks())
		},
	}}
}

// TestKillInsidePasses kills the operator between two writes of one Decision, at every
// position of the passes that matter (CRASH_ALL=1: of every pass) of five transitions:
// a rolling update with surge, a Recreate, a scale up and down, multinode gangs on
// LeaderWorkerSets, and a first deploy. After each kill it checks ownership (and,
// under Recreate, that Ready is False once pods are being taken away), restarts the
// operator, and requires the transition to converge with the invariant watcher
// silent; the cases with a history limit of one also delete a revision in every
// transition. It logs every pass of each reference transition and the positions
// covered.
func TestKillInsidePasses(t *testing.T) {
	e := getEnv(t)
	begin := time.Now()
	all := os.Getenv("CRASH_ALL") != ""
	only := map[string]bool{}
	for _, name := range strings.FieldsFunc(os.Getenv("CRASH_CASES"), func(r rune) bool { return r == ',' }) {
		only[name] = true
	}
	k := newPassKiller(t, e)
	var covered, targeted int
	var missed []string
	for _, c := range passCases() {
		if len(only) > 0 && !only[c.name] || c.ci == nil && !all {
			continue
		}
		cov := runPassCase(t, k, c, all)
		t.Log(cov)
		covered += cov.killed
		targeted += cov.positions
		for _, m := range cov.missed {
			if m.shape == cov.passes[0].shape {
				missed = append(missed, fmt.Sprintf("%s: after request %d of %q", c.name, m.at, m.shape))
			}
		}
	}
	if p := grepLog(k.logPath, "panic", "fatal error", "data race"); len(p) > 0 {
		t.Errorf("operator log shows %d panics:\n%s", len(p), strings.Join(p, "\n"))
	}
	// The first pass of a transition is decided from the same state every time: each of
	// its positions must be met. Later passes are shaped by readiness timing; their
	// misses are logged with the case's coverage.
	if len(missed) > 0 {
		t.Errorf("%d positions of a first pass never met:\n  %s", len(missed), strings.Join(missed, "\n  "))
	}
	t.Logf("killed at %d of %d positions inside passes (CRASH_ALL=%v); runtime %s", covered, targeted, all, time.Since(begin).Round(time.Second))
}
