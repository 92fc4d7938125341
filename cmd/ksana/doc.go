// Command ksana is the timed-job service: the REST API of
// [github.com/ksana-dev/ksana/cron/httpapi] over a
// [github.com/ksana-dev/ksana/cron.Runner] that keeps its jobs in one JSON
// file ([github.com/ksana-dev/ksana/store/jsonstore]) and calls HTTP
// callbacks.
//
// # Running
//
//	go run ./cmd/ksana
//
// serves the API on port 7100 with the jobs in ./data/jobs.json; nothing
// else is needed. docs/ksana.md in the repository walks through a first
// session with curl.
//
// One service per data directory: while it runs it holds an exclusive
// advisory lock on ./data/jobs.lock (see Locking in
// [github.com/ksana-dev/ksana/store/jsonstore]), so a second ksana started
// on the same directory exits 1 at once with a message naming the
// directory, and leaves its files alone. The system drops the lock when
// the process ends, even by a crash.
//
// # Console
//
// The web console ([github.com/ksana-dev/ksana/cron/console]) is served at
// /ui/, and GET / redirects there: the jobs, their history and next runs,
// the job form, run now, pause, resume, delete and bulk actions on a
// filter. Its writes go through the API with the signed-in user's token
// (the sign-in form asks for it when KSANA_API_TOKEN or
// KSANA_API_TOKENS_FILE is set), so the API's rules, roles and audit log
// apply. Every other path is the API's.
//
// # Commands
//
// The same binary is a client of a running service's API (through
// [github.com/ksana-dev/ksana/cron/client]):
//
//	ksana jobs ls [-limit N|-all] [-after ID] [-enabled B] [-kind K] [-status S] [-name N] [-type T]
//	                                 a page of 100 jobs unless -limit says otherwise; -all: every job
//	ksana jobs get|rm|run|pause|resume ID
//	ksana jobs pause ID -until T|-for D   paused until an RFC3339 time, or for a duration (2h): it resumes by itself
//	ksana jobs add -f FILE           (or -f - to read stdin) the job's JSON form, as POST /jobs takes it
//	ksana jobs edit ID -f FILE       a JSON merge patch, as PATCH /jobs/{id} takes it
//	ksana jobs runs ID [-limit N] [-status S]
//	ksana jobs next ID [-n N]        the next run times, in UTC and in the job's zone
//	ksana runs [-job ID] [-status S] [-since T] [-until T] [-instance I] [-limit N] [-after C]
//	ksana runs get RUN_ID [-wait D]  one run by its id, with its trigger; -wait: wait for its end
//	ksana audit [-job ID] [-who NAME] [-since T] [-after N] [-limit N] [-reverse]
//	                                 oldest first; -reverse: the newest -limit entries, newest first
//	ksana pause [-until T|-for D] [-reason R]   pause every job of the service (admin role); ksana health shows it
//	ksana resume                                end that pause
//	ksana health
//
// The audit log and the service pause are kept in the store (the JSON
// file's directory: audit.jsonl and pause.json; the database: ksana_audit
// and ksana_settings), so they survive a restart and, on a database, are
// one for every instance (a pause reaches every instance within a second).
// The Idempotency-Key of a run-now (ksana jobs run -idempotency-key) is
// kept in the database too (ksana_idempotency): a retry that reaches
// another instance, or comes after a restart, answers the first run; with
// the JSON file the keys live in memory and a restart forgets them.
//
// Each prints a table for people, or with -o json the API's JSON for
// scripts. The service's URL is -addr, else KSANA_ADDR, else
// http://127.0.0.1:7100; the token is -token, else KSANA_API_TOKEN. Flags
// may come before or after the ID. The exit status is 0 on success, 1
// when the API refuses (the API's message, the field at fault and the
// HTTP status are printed on stderr) or cannot be reached, and 2 for a
// bad command line; ksana -h lists the commands and each takes -h.
// ksana with no command starts the service. What a terminal would act on
// rather than show (control characters but newline and tab, DEL, C1
// controls, Unicode bidirectional controls, bytes that are not UTF-8),
// which a job name or a callback's reply may hold, is printed escaped:
// \x1b, \u009b, \u202e; -o json escapes the same characters as JSON does,
// so it decodes to the exact values.
//
// # Several instances on one database
//
// DATABASE_URL=postgres://... (or sqlite:PATH) keeps the jobs in that
// database ([github.com/ksana-dev/ksana/store/sqlstore.Jobs]) instead of
// jobs.json, and every instance on it shares them: each serves the whole
// API; each holds in memory and fires only the jobs of the partitions it
// leases ([github.com/ksana-dev/ksana/store/sqlstore.Leases], renewed every
// KSANA_LEASE_TTL/3, default TTL 6s, at least 2s: shorter leases move
// partitions between live instances when the database's commits slow
// down), loading a partition's jobs from the
// database when it gains the lease; the API reads and writes the jobs
// another instance holds through the database, and the list, its pages
// and the ksana_jobs metric come from the database; a change made through any instance
// reaches the others at once (LISTEN/NOTIFY; SQLite polls every 250ms).
// An instance killed with kill -9 is replaced within KSANA_LEASE_TTL plus a
// third. Each slot is called at most once across the instances: its run
// row, unique on job id and scheduled time, is inserted before the
// callback is called. A handover between live instances (one joins, or
// comes back) loses no slot, and every claimed run ends with a status: a
// run its instance could not finish (killed, or stopped past its lease)
// is recorded missed, "holder died" or "holder stopped", within
// KSANA_LEASE_TTL and two thirds, and GET /jobs/{id}/runs names the
// instance of each run. A pause, resume or PATCH is never undone by the
// bookkeeping of an earlier run. KSANA_INSTANCE must name one live
// instance: a second process with the name of a live one is refused at
// start with exit status 2. GET /jobs while the database cannot answer
// is a 503 with Retry-After. GET /health adds the instance name, the live
// members, the partitions held and jobs_held (the jobs in memory), counts
// as JSON numbers, and how the lease renewals go: lease_age_ms (since the
// last), lease_gap_max_ms (the longest time between two, a third of the
// TTL while all is well), lease_round_max_ms, lease_failures,
// partitions_gained and partitions_lost; a gap near the TTL means commits
// too slow for it. /metrics has them as ksana_lease_* and
// ksana_partitions_moved_total. The data directory is not used.
//
// # Configuration
//
// ksana -h lists the environment variables it reads, with their defaults:
// LISTEN_ADDR (every interface), PORT (7100), KSANA_DATA or DATA_DIR
// (./data), WORKERS (4),
// DEFAULT_TIMEOUT (10s), MAX_RETRIES (3), RETRY_BACKOFF (5s),
// KSANA_RUN_HISTORY (50 runs kept per job),
// DRAIN_TIMEOUT (30s), MIN_INTERVAL (1s, the shortest every interval),
// LOG_LEVEL (info), LOG_FORMAT (text),
// KSANA_API_TOKEN and KSANA_CALLBACK_ALLOW (unset), DATABASE_URL and
// KSANA_INSTANCE (unset), KSANA_LEASE_TTL (6s), and GOGC (50: once its
// jobs are loaded, the service sets the Go collector's target to half of
// Go's own default, as its heap is mostly its jobs, which live as long
// as it does; a GOGC of the environment wins). A bad value stops the
// start with a message naming the variable, and exit status 2; so does a
// DATABASE_URL that cannot be opened. Any other failure to start exits 1.
// KSANA_API_TOKEN guards every endpoint but GET /health, /openapi.json
// included. Every token, KSANA_API_TOKEN and those of
// KSANA_API_TOKENS_FILE, holds at least 16 bytes.
//
// # Reloading the tokens
//
// SIGHUP rereads KSANA_API_TOKENS_FILE, and a reload never keeps a token
// the file no longer holds: a bad line is refused and logged as an ERROR
// naming its number (never its words), while the other lines apply; a
// file that is empty, holds no good line or cannot be read leaves no
// token of the file valid, and authentication stays on. GET /health
// reports the last reload: tokens_reload (ok, bad lines or failed),
// tokens_reload_at and tokens_reload_errors. KSANA_API_TOKEN is not in
// the file and stays valid. SIGHUP never stops the service: it is caught
// from the start of the process, and without KSANA_API_TOKENS_FILE it is
// logged and ignored. A bad file at start is exit 2, naming the lines.
//
// KSANA_CALLBACK_ALLOW, a comma-separated list of patterns (host names
// such as api.example.com or *.internal, IP addresses such as 10.1.2.3,
// CIDR blocks such as 10.0.0.0/8), holds job URLs and alert webhooks to
// it: a job outside it is refused (400), and the service checks the host
// of every request it makes, each redirect included, and the address it
// dials after DNS. An IP literal passes only where an address or CIDR
// pattern names it, one with an IPv6 zone never; a loopback, link-local
// or unspecified address is refused unless an address or CIDR pattern
// names it: to call a callback on this machine with the list set, add
// 127.0.0.1 (or ::1, 127.0.0.0/8). A refused run fails at once, naming
// the address. Unset (the default), nothing is checked and callbacks on
// 127.0.0.1 are called, as in the README's tour; set it on any service
// that untrusted users can give jobs to.
//
// # Durability
//
// Every write the API acknowledges is on disk: the store runs with its
// journal ([github.com/ksana-dev/ksana/store/jsonstore.Config] Journal), so
// an API write costs one small synced append, and run bookkeeping is
// appended to the same journal within 50ms. jobs.json is rewritten in the
// background once the journal reaches half its size (at least 4 MiB), and
// at a clean stop, which leaves the journal empty. A start replays the
// journal.
//
// # Logs, metrics, shutdown
//
// Logs are structured (log/slog) on stderr: every run is logged with
// job_id, name, status, latency_ms and error. GET /metrics serves
// Prometheus text: jobs by state, runs by status, firing lag, callback
// latency, store flush latency, API requests (the collector of package
// github.com/ksana-dev/ksana/metrics, which a service embedding the runner
// registers in its own registry).
//
// On SIGINT or SIGTERM it stops accepting requests, lets the runs in flight
// finish for up to DRAIN_TIMEOUT and cancels the rest, rewrites jobs.json
// with every change (emptying the journal), and exits 0.
package main
