//go:build !linux

package cluster

import "syscall"

// sysProcAttr puts each component in its own process group. Only Linux has
// Pdeathsig; elsewhere a crashed test process can leave components behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
