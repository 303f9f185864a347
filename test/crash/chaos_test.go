//go:build linux

package crash

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// chaos keeps one operator process running and SIGKILLs it at random points:
//   - spec: a uniform 0–3 s after each spec change (one kill per change);
//   - events: after a uniform 1–25 workload events (pod, Deployment, DGD) since the
//     operator started, or after 6 s if none come (an idle operator);
//   - write: within 20 ms of the operator's 1st–6th write since it started (a Deployment
//     created, scaled or deleted, a ControllerRevision written, a status written), to
//     land between two writes of one pass, or after 6 s if it writes nothing;
//   - uptime: a uniform 0.3–2.5 s after the operator started.
//
// A fresh spec change always takes precedence. After each kill it restarts the
// operator after a uniform 0.05–1 s. Every random choice comes from one seeded source.
type chaos struct {
	t       *testing.T
	e       *env
	seed    int64
	rng     *rand.Rand
	logPath string
	args    []string
	begin   time.Time
	// modes are the kill triggers drawn from besides spec (CRASH_MODES, comma-separated;
	// default events,write,uptime); maxWrites bounds the write trigger (CRASH_MAX_WRITES,
	// default 6).
	modes     []string
	maxWrites int

	mu       sync.Mutex
	op       *operator
	starts   int
	kills    []killRecord
	crashes  []string // exits the chaos monkey did not cause
	specSeq  int      // spec changes so far
	specAt   time.Time
	events   func() int // workload events seen so far (the current scenario's watcher)
	writes   *writeCounter
	state    func() string // the DGD's state at a kill, for the log
	stopped  bool
	cancel   context.CancelFunc
	finished chan struct{}
}

type killRecord struct {
	n      int
	at     time.Duration // since the test began
	mode   string
	uptime time.Duration
	state  string
}

func newChaos(t *testing.T, e *env, seed int64, logPath string, args ...string) *chaos {
	c := &chaos{t: t, e: e, seed: seed, rng: rand.New(rand.NewSource(seed)), logPath: logPath,
		args: args, begin: time.Now(), finished: make(chan struct{}),
		modes: []string{"events", "write", "uptime"}, maxWrites: 6}
	if v := os.Getenv("CRASH_MODES"); v != "" {
		c.modes = strings.Split(v, ",")
		for _, m := range c.modes {
			if m != "events" && m != "write" && m != "uptime" {
				t.Fatalf("CRASH_MODES: unknown trigger %q (events, write, uptime)", m)
			}
		}
	}
	if v := os.Getenv("CRASH_MAX_WRITES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CRASH_MAX_WRITES=%q: want a positive integer", v)
		}
		c.maxWrites = n
	}
	return c
}

// run starts the operator and the kill loop; stop ends both.
func (c *chaos) run() {
	if err := c.startOperator(); err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	var err error
	if c.writes, err = c.e.countWrites(ctx); err != nil {
		cancel()
		c.t.Fatal(err)
	}
	go c.loop(ctx)
}

// stop ends the kill loop and kills the operator. Idempotent.
func (c *chaos) stop() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		<-c.finished
	}
	c.mu.Lock()
	op := c.op
	c.mu.Unlock()
	op.kill()
}

// specChanged is the scenario's hook: a spec was written.
func (c *chaos) specChanged() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.specSeq++
	c.specAt = time.Now()
}

// watch points the event-count and state hooks at the current scenario.
func (c *chaos) watch(events func() int, state func() string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events, c.state = events, state
}

func (c *chaos) startOperator() error {
	c.mu.Lock()
	c.starts++
	n := c.starts
	c.mu.Unlock()
	appendLog(c.logPath, "start #%d at %s", n, c.since())
	op, err := c.e.startOperator("dgd-operator", c.logPath, c.args...)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.op = op
	c.mu.Unlock()
	return nil
}

func (c *chaos) since() time.Duration { return time.Since(c.begin).Round(time.Millisecond) }

func (c *chaos) uniform(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(c.rng.Int63n(int64(hi-lo)+1))
}

// loop is the kill loop; it owns c.rng.
func (c *chaos) loop(ctx context.Context) {
	defer close(c.finished)
	lastSpec := 0
	c.mu.Lock()
	lastSpec = c.specSeq // a spec written before the operator started is no kill point
	c.mu.Unlock()
	for {
		c.mu.Lock()
		op, events := c.op, c.events
		c.mu.Unlock()
		// Draw this round's trigger.
		mode := c.modes[c.rng.Intn(len(c.modes))]
		nEvents := 1 + c.rng.Intn(25)
		nWrites := 1 + c.rng.Intn(c.maxWrites)
		writeDelay := c.uniform(0, 20*time.Millisecond)
		uptime := c.uniform(300*time.Millisecond, 2500*time.Millisecond)
		specDelay := c.uniform(0, 3*time.Second)
		restart := c.uniform(50*time.Millisecond, time.Second)
		startEvents, startWrites := 0, c.writes.count()
		if events != nil {
			startEvents = events()
		}
		desc := ""
		for desc == "" {
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			case <-c.writes.changed():
			}
			if !op.alive() {
				desc = "none: it exited by itself (" + op.exitStatus() + ")"
				c.mu.Lock()
				c.crashes = append(c.crashes, fmt.Sprintf("operator exited by itself at %s: %s; log tail:\n%s", c.since(), op.exitStatus(), tailLog(c.logPath, 30)))
				c.mu.Unlock()
				break
			}
			c.mu.Lock()
			seq, at := c.specSeq, c.specAt
			if c.events != nil && events == nil {
				events, startEvents = c.events, c.events()
			}
			c.mu.Unlock()
			switch {
			case seq > lastSpec:
				if time.Since(at) >= specDelay {
					lastSpec = seq
					desc = fmt.Sprintf("spec: %s after spec change #%d", specDelay.Round(time.Millisecond), seq)
				}
			case mode == "events" && events != nil && events()-startEvents >= nEvents:
				desc = fmt.Sprintf("events: after %d workload events", nEvents)
			case mode == "events" && time.Since(op.started) > 6*time.Second:
				desc = "events: idle for 6s"
			case mode == "write" && c.writes.count()-startWrites >= nWrites:
				time.Sleep(writeDelay)
				desc = fmt.Sprintf("write: %s after operator write #%d", writeDelay.Round(time.Millisecond), nWrites)
			case mode == "write" && time.Since(op.started) > 6*time.Second:
				desc = "write: idle for 6s"
			case mode == "uptime" && time.Since(op.started) >= uptime:
				desc = fmt.Sprintf("uptime: %s after start", uptime.Round(time.Millisecond))
			}
		}
		if op.alive() {
			op.kill()
			rec := killRecord{at: c.since(), mode: desc, uptime: time.Since(op.started).Round(time.Millisecond)}
			c.mu.Lock()
			state := c.state
			c.mu.Unlock()
			if state != nil {
				rec.state = state()
			}
			c.mu.Lock()
			rec.n = len(c.kills) + 1
			c.kills = append(c.kills, rec)
			c.mu.Unlock()
			appendLog(c.logPath, "SIGKILL #%d at %s (%s, up %s); %s", rec.n, rec.at, rec.mode, rec.uptime, rec.state)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(restart):
		}
		if err := c.startOperator(); err != nil {
			c.mu.Lock()
			c.crashes = append(c.crashes, err.Error())
			c.mu.Unlock()
			return
		}
	}
}

// report summarizes the kills for the test log.
func (c *chaos) report() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	modes := map[string]int{}
	for _, k := range c.kills {
		modes[strings.SplitN(k.mode, ":", 2)[0]]++
	}
	fmt.Fprintf(&b, "seed %d: %d SIGKILLs survived, %d operator starts, kill triggers %v\n", c.seed, len(c.kills), c.starts, modes)
	for _, k := range c.kills {
		fmt.Fprintf(&b, "  kill #%-2d at %8s up %6s  %-38s %s\n", k.n, k.at, k.uptime, k.mode, k.state)
	}
	return b.String()
}

func (c *chaos) killCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.kills)
}

func (c *chaos) unexpectedExits() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.crashes...)
}

// describe is the operator's state for failure messages.
func (c *chaos) describe() string {
	c.mu.Lock()
	op, n := c.op, len(c.kills)
	c.mu.Unlock()
	s := fmt.Sprintf("  operator: %d kills so far (seed %d)", n, c.seed)
	if op != nil {
		s += fmt.Sprintf(", last started %s ago, %s", time.Since(op.started).Round(time.Millisecond), op.exitStatus())
	}
	return s + "\n  operator log tail:\n" + indent(tailLog(c.logPath, 25))
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
