//go:build unix

package usage

import "syscall"

// pgid returns the process group of pid, 0 when it cannot be read.
func pgid(pid int) int {
	g, err := syscall.Getpgid(pid)
	if err != nil {
		return 0
	}
	return g
}
