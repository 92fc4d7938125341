package proc

import "syscall"

// sysProcAttr puts the process in a group of its own (so signals reach its
// children) and has the kernel kill it when the node-unit dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
