//go:build linux

package cluster

import "syscall"

// sysProcAttr puts each component in its own process group (a Ctrl-C at a terminal
// reaches only the test process, which then stops the components in order) and has
// the kernel SIGKILL it if the thread that started it dies, so nothing outlives a
// crashed test binary. Go threads do not exit while the program runs unless a
// goroutine locked to one exits, so do not call Start from a goroutine that holds
// runtime.LockOSThread.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
