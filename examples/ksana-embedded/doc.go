// Command ksana-embedded shows the timed-job service's parts inside a
// service of your own: a [cron.Runner] over the JSON file store
// ([jsonstore]), its REST API ([httpapi]) mounted under /admin/ of your own
// mux, next to your own endpoints. It creates a job through the API that
// calls back into the same server every second, prints the runs, pauses
// the job, and stops cleanly.
//
//	go run ./examples/ksana-embedded
//
// The jobs live in a temporary directory that is removed at the end.
package main
