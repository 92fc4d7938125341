// Command gofunc schedules a Go function with the cron runner: the first
// example of the README. It registers a handler for the job type
// "report", adds a job of that type running every second, and stops the
// runner after the third run.
//
//	go run ./examples/gofunc
package main
