//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package jsonstore

import (
	"errors"
	"os"
	"syscall"
)

// lockSupported reports whether lockFile really locks on this platform.
const lockSupported = true

// lockFile takes an exclusive advisory lock (flock LOCK_EX|LOCK_NB) on f
// without waiting; a lock held through another open file description is
// errWouldBlock. The lock belongs to f's open file description: closing f
// releases it, and so does the end of the process.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EAGAIN):
			return errWouldBlock
		default:
			return err
		}
	}
}
