package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const stopGrace = 3 * time.Second

// Child is a process a test started (StartChild), reaped in the background. The
// local control plane's components are Children; so is test/prom's Prometheus.
type Child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // exit status, valid once done is closed
}

// StartChild starts cmd in its own process group, SIGKILLed if the test binary dies
// (see sysProcAttr), and reaps it when it exits.
func StartChild(cmd *exec.Cmd) (*Child, error) {
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &Child{cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// Done is closed once the process has exited; Err is then its exit status.
func (c *Child) Done() <-chan struct{} { return c.done }

// Err is the exit status, once Done is closed.
func (c *Child) Err() error { return c.err }

// PID is the process ID.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// Exited reports whether the process has exited.
func (c *Child) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM, waits up to grace, then sends SIGKILL, and waits for the exit.
// It signals only this process (by PID) and never a process group.
func (c *Child) Stop(grace time.Duration) {
	if c.Exited() {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// process is one started component binary.
type process struct {
	*Child
	name string
	tail *tailBuffer
	log  io.Closer // the log file, if any
}

// exited reports whether the process has exited.
func (p *process) exited() bool { return p.Exited() }

// stop stops the process (Child.Stop) and closes its log.
func (p *process) stop(grace time.Duration) {
	p.Stop(grace)
	if p.log != nil {
		_ = p.log.Close()
	}
}

// launch starts binary name from BinDir with args, its output going to the cluster's
// log destination, and records its PID. It does not wait for anything.
func (c *Cluster) launch(name string, args []string) (*process, error) {
	p := &process{name: name, tail: &tailBuffer{max: 16 << 10}}
	out, err := c.logWriter(name)
	if err != nil {
		return nil, err
	}
	if cl, ok := out.(io.Closer); ok {
		p.log = cl
	}
	w := io.MultiWriter(out, p.tail)
	cmd := exec.Command(filepath.Join(c.opts.BinDir, name), args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = c.WorkDir, w, w
	if p.Child, err = StartChild(cmd); err != nil {
		if p.log != nil {
			_ = p.log.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return p, c.record(p)
}

// lastOutput is the last n lines of the output of the newest process named name, or
// a line saying there is none.
func (c *Cluster) lastOutput(name string, n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.procs) - 1; i >= 0; i-- {
		if c.procs[i].name == name {
			return lastLines(c.procs[i].tail.String(), n)
		}
	}
	return "(" + name + " was not started)"
}

// record adds p to the processes Stop will end and rewrites WorkDir/pids.
func (c *Cluster) record(p *process) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.procs = append(c.procs, p)
	var b strings.Builder
	for _, q := range c.procs {
		fmt.Fprintf(&b, "%s %d\n", q.name, q.PID())
	}
	return os.WriteFile(filepath.Join(c.WorkDir, "pids"), []byte(b.String()), 0o600)
}

// logWriter is where component name writes: a prefixing writer over
// Options.LogWriter, or WorkDir/logs/<name>.log (a new file for each start attempt).
func (c *Cluster) logWriter(name string) (io.Writer, error) {
	if c.opts.LogWriter != nil {
		return &prefixWriter{prefix: "[" + name + "] ", out: c.opts.LogWriter, mu: &c.logMu}, nil
	}
	dir := filepath.Join(c.WorkDir, "logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// stopAll stops every recorded process in reverse start order.
func (c *Cluster) stopAll() {
	c.mu.Lock()
	procs := append([]*process(nil), c.procs...)
	c.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop(stopGrace)
	}
}

// readRSS is VmRSS of pid in bytes, from /proc/<pid>/status.
func readRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmRSS (zombie?)")
}

// tailBuffer keeps the last max bytes written to it, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String returns the kept output.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// prefixWriter writes whole lines, each prefixed, to a writer shared by all components.
type prefixWriter struct {
	prefix  string
	out     io.Writer
	mu      *sync.Mutex
	partial []byte
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := append([]byte(w.prefix), w.partial[:i+1]...)
		w.partial = w.partial[i+1:]
		if _, err := w.out.Write(line); err != nil {
			return len(p), err
		}
	}
}
