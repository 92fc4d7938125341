// Command jsonstore-load measures cmd/ksana on its JSON store under load:
// it writes a jobs.json of -jobs every-jobs spread so that about -rate of
// them fire each second, starts the ksana binary on it as a child process
// (WORKERS=64), serves the callbacks on a local endpoint, and for
// -duration samples the child's /proc (bytes written to disk, RSS), the
// firing lag (callback arrival minus the scheduled time), the latency of
// API reads and writes made meanwhile, and the bytes the store appended
// (jobs.journal and runs.jsonl growth: the changes themselves). Then it
// restarts the child after SIGTERM and after SIGKILL and times each
// restart to /health. With -runs it first writes that many runs into
// runs.jsonl, and after each start it times the first history query
// across jobs (GET /runs), asked as soon as /health answers.
//
//	go build -o /tmp/ksana ./cmd/ksana
//	go run ./examples/jsonstore-load -bin /tmp/ksana -jobs 100000 -rate 1000 -duration 60s
//
//	go run ./examples/jsonstore-load -bin /tmp/ksana -jobs 1000000 -runs 1000000 -rate 1000 -duration 30s
//
// Linux only (it reads /proc).
package main
