//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd)

package jsonstore

import "os"

// lockSupported reports whether lockFile really locks on this platform.
const lockSupported = false

// lockFile does nothing where the standard library offers no flock
// (Windows, Solaris, AIX, Plan 9, js, wasip1): there, keeping a data
// directory to one process is the operator's job.
func lockFile(*os.File) error { return nil }
