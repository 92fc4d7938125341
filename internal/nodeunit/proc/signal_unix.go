//go:build unix

package proc

import "syscall"

// signalGroup sends SIGTERM (or SIGKILL when kill is set) to the process
// group led by pid.
func signalGroup(pid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-pid, sig)
}

// killGroup kills what is left of the process group led by pid.
func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
