// Command every is ksana's quick trial: it starts a local callback server,
// schedules a few timed jobs on a [cron.Runner] (an every job with jitter,
// a once job and a cron expression), and prints each firing as it happens,
// from the server's side and from the runner's observer, until -duration
// has passed or Ctrl-C is pressed.
//
//	go run ./examples/every
//	go run ./examples/every -duration 30s
package main
