//go:build linux

package crash

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// operator is one running operator process (cmd/manager), in its own process group.
type operator struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{} // closed once the process has exited and been reaped
	killed  atomic.Bool   // set by kill before the signal: any other exit is a crash
}

// startOperator runs the operator binary as name (a symlink, so that the API server
// records name as the field manager of its writes), pointed at the cluster by
// KUBECONFIG, with metrics and probes off, appending its output to logPath.
func (e *env) startOperator(name, logPath string, args ...string) (*operator, error) {
	return e.startOperatorWith(e.cl.Kubeconfig, name, logPath, args...)
}

// startOperatorWith is startOperator with another kubeconfig (the write proxy's).
func (e *env) startOperatorWith(kubeconfig, name, logPath string, args ...string) (*operator, error) {
	link := filepath.Join(e.dir, name)
	if _, err := os.Lstat(link); err != nil {
		if err := os.Symlink(e.bin, link); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(link, append([]string{"--metrics-bind-address=0", "--health-probe-bind-address=0", "--webhook-bind-address=0"}, args...)...)
	cmd.Env = append(withoutVar(os.Environ(), "KUBECONFIG"), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = f, f
	// Own process group (killed as a group), and SIGKILLed by the kernel if the test
	// binary dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	o := &operator{name: name, logPath: logPath, cmd: cmd, started: time.Now(), done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(o.done)
	}()
	return o, nil
}

func withoutVar(environ []string, name string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// kill SIGKILLs the operator's process group and waits until it is reaped. Safe to
// call more than once and on an operator that already exited.
func (o *operator) kill() {
	if o == nil {
		return
	}
	select {
	case <-o.done:
		return
	default:
	}
	o.killed.Store(true)
	_ = syscall.Kill(-o.cmd.Process.Pid, syscall.SIGKILL)
	<-o.done
}

// alive reports whether the process is still running.
func (o *operator) alive() bool {
	select {
	case <-o.done:
		return false
	default:
		return true
	}
}

// exitStatus describes how the process ended.
func (o *operator) exitStatus() string {
	if o.cmd.ProcessState == nil {
		return "running"
	}
	return o.cmd.ProcessState.String()
}

// appendLog writes a marker line into a log file (between two processes' output).
func appendLog(path, format string, args ...any) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "=== "+format+"\n", args...)
}

// grepLog returns the lines of path containing any of substrs (case-insensitive).
func grepLog(path string, substrs ...string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := strings.ToLower(sc.Text())
		for _, s := range substrs {
			if strings.Contains(line, strings.ToLower(s)) {
				out = append(out, sc.Text())
				break
			}
		}
	}
	return out
}

// tailLog returns the last n lines of path.
func tailLog(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
