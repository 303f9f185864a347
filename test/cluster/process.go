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

// process is one started component binary.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // exit status, valid once done is closed
	tail *tailBuffer
	log  io.Closer // the log file, if any
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits up to grace, then sends SIGKILL, and waits for the exit.
// It signals only this process (by PID) and never a process group.
func (p *process) stop(grace time.Duration) {
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	if p.log != nil {
		_ = p.log.Close()
	}
}

// launch starts binary name from BinDir with args, its output going to the cluster's
// log destination, and records its PID. It does not wait for anything.
func (c *Cluster) launch(name string, args []string) (*process, error) {
	p := &process{name: name, done: make(chan struct{}), tail: &tailBuffer{max: 16 << 10}}
	out, err := c.logWriter(name)
	if err != nil {
		return nil, err
	}
	if cl, ok := out.(io.Closer); ok {
		p.log = cl
	}
	w := io.MultiWriter(out, p.tail)
	p.cmd = exec.Command(filepath.Join(c.opts.BinDir, name), args...)
	p.cmd.Dir, p.cmd.Stdout, p.cmd.Stderr = c.WorkDir, w, w
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		if p.log != nil {
			_ = p.log.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, c.record(p)
}

// record adds p to the processes Stop will end and rewrites WorkDir/pids.
func (c *Cluster) record(p *process) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.procs = append(c.procs, p)
	var b strings.Builder
	for _, q := range c.procs {
		fmt.Fprintf(&b, "%s %d\n", q.name, q.cmd.Process.Pid)
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
