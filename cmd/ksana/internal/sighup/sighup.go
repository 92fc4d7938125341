package sighup

import (
	"os"
	"os/signal"
	"syscall"
)

// C receives the SIGHUPs of the process; it keeps one not yet read (more
// are dropped, which a reload does not need).
var C = make(chan os.Signal, 1)

func init() { signal.Notify(C, syscall.SIGHUP) }
