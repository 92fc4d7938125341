// Package sighup catches SIGHUP from the start of the ksana process,
// before the code of package main runs.
//
// A Go program that has not asked for SIGHUP exits when it gets one, and
// package main's code runs only after every package it imports is
// initialized. ksana reloads its tokens on SIGHUP and must never end on
// one (a "systemctl reload" sent while it starts would stop it without
// draining), so this package, which imports nothing but the standard
// library's signal handling, asks for SIGHUP in its init and keeps the
// signal in [C] until the service reads it. Importing it is enough.
//
// A command that is not the service, such as a client subcommand, calls
// signal.Reset(syscall.SIGHUP) to end on a hangup as programs do.
package sighup
