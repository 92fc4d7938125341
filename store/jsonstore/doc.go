// Package jsonstore is the one-JSON-file job store of the timed-job service:
// a [cron.Store] (with the optional [cron.RunStore]) that
// keeps every job in memory and on disk in jobs.json, a journal of the
// changes not yet in it, and the run history in runs.jsonl, all in a data
// directory.
//
// In memory a job takes about 100 bytes and its id and name: jobs made
// from one template (the same URL, body, headers, method, timeouts,
// retries and interval) share one copy of those, and the index of ids
// holds a pointer a job. At a million jobs of a few templates the store
// holds about 155 bytes a job.
//
// # Files
//
// The data directory given to [New] (cmd/ksana: $KSANA_DATA, else
// $DATA_DIR, else ./data) is created 0700 when missing and holds:
//
//   - jobs.json ([JobsFile]): what a user reads and may edit while the
//     service is stopped. The top-level object has "version" (1,
//     [FormatVersion]), "updated_at" and "jobs", an array of jobs in creation
//     order with exactly the fields of [cron.Job]'s JSON form. One job per
//     line keeps diffs readable. While the service runs it may lag behind
//     the journal; after a clean stop ([Store.Close]) it holds everything.
//   - jobs.journal ([JournalFile]): with [Config.Journal], the changes not
//     yet in jobs.json, one JSON record per line: a job saved (whole), a job
//     deleted (its id), or the bookkeeping of a run (last_run_at,
//     next_run_at, last_status, last_error, and failures and last_alert
//     when set). Empty after a clean stop.
//     During a rewrite of jobs.json the journal is renamed
//     jobs.journal.<seq> and a new one started; the renamed one is removed
//     once the rewrite is on disk.
//   - runs.jsonl ([RunsFile]): the run history, one [cron.Run] per line,
//     appended, with one more field, "prev": the offset + 1 of the previous
//     line of the same job (0: none), so a job's runs are read from the
//     file, newest first, without reading the rest. The newest
//     [Config.RunHistory] runs per job (default 50) are kept: the file is
//     compacted when it holds more than twice as many lines as are kept,
//     plus 4096.
//   - runs.idx ([RunsIndexFile]): written by Close, where each job's newest
//     and oldest lines are in runs.jsonl and the history index (each
//     line's time, status, run id and instance, about 30 bytes a run), so
//     that a start reads and indexes only the lines appended after it, also
//     after a crash. It stays until the next Close, unless a compaction of
//     runs.jsonl or the deletion of a job with runs removes it first; it is
//     not used if its checksum fails or the part of runs.jsonl it covers
//     changed. Without it a start reads runs.jsonl whole and builds the
//     index in the same read.
//   - pause.json ([PauseFile]): the service-wide pause ([cron.PauseStore]),
//     replaced whole (written, synced, renamed) by each change. One that
//     does not parse is renamed pause.json.bad and the service starts
//     unpaused.
//   - audit.jsonl ([AuditFile]): the audit log ([cron.AuditLog]), one
//     [cron.AuditEntry] per line, appended by each change and synced
//     within 50 ms (the records of that time share one sync) and at
//     Close: a crash may lose the records of its last 50 ms; the
//     newest [Config.AuditKeep] (default 10,000) are kept, in memory too:
//     the file is rewritten with them when it holds twice as many. A torn
//     last line (a crash during an append) is dropped at start.
//   - jobs.lock ([LockFile]): empty; locked while a [Store] has the
//     directory open (see Locking below).
//
// They are created 0600.
//
// The idempotency keys of run-now requests ([cron.IdempotencyStore]) are
// kept in memory only (at most [cron.DefaultIdempotencyKeys]): a restart forgets them,
// so a request sent again after a restart runs again.
//
// # Locking
//
// A data directory belongs to one open [Store] at a time. [New] takes an
// exclusive lock on jobs.lock before it reads or changes anything else in
// the directory (it only creates the directory and jobs.lock when they are
// missing), and [Store.Close] releases it. A second [New] on the same
// directory while the first store is open, from another process or from
// this one, fails within 200ms (it tries again that long, as a process
// started by another goroutine holds the lock of a store just closed
// until it runs its program) with an error that names the directory
// and wraps [ErrLocked] (test it with errors.Is), and leaves every file as
// it found it: no journal replay, no rewrite, no cleanup. So two services
// started on one directory cannot overwrite each other's jobs.json: the
// second one stops at start.
//
// The lock is advisory and per data directory: it is a flock (LOCK_EX |
// LOCK_NB) on Linux, the BSDs, macOS and illumos, which only other
// lockers respect, and it guards nothing else (two stores on two
// directories never conflict; a program that edits jobs.json by hand
// ignores it). It belongs to the open file, not to the file name, so the
// system drops it when the process ends, even by a crash: a stale lock
// never blocks a restart, and jobs.lock is never removed. On a network
// file system it is as reliable as that system's flock. Where the standard
// library has no flock (Windows, Solaris, AIX, Plan 9, js, wasip1) no lock
// is taken and keeping one process per directory is the operator's job.
//
// # Writing: the journal and rewrites of jobs.json
//
// With [Config.Journal] (cmd/ksana sets it), every change is appended to
// the journal, and jobs.json is rewritten only now and then:
//
//   - [Store.Save] and [Store.Delete] append their record and return once it
//     is synced: an acknowledged change survives a crash, kill -9 or power
//     loss. Appends commit in groups: the records of changes made while a
//     sync is under way go out together in the next write and share its
//     sync.
//   - [Store.Record] (the bookkeeping of a run) queues its record and
//     returns at once; the queue is written and synced within
//     [Config.FlushInterval] (default 50ms), or with the next Save. A
//     bookkeeping record not yet written when the process dies is lost:
//     the job then shows the run before, and fires as its schedule says.
//   - jobs.json is rewritten when the journal files have grown past
//     [Config.CompactRatio] times its size (default 0.5) and at least
//     [Config.CompactMin] bytes (default 4 MiB), and at Close. A burst of
//     10,000 bookkeeping updates thus costs about 2 MB of appends and no
//     rewrite.
//
// A rewrite runs on the store's own goroutine and never holds the API or
// the timer for long: it first renames the journal (see Files), then
// encodes the jobs from memory 1024 at a time under the store's lock,
// streaming them to jobs.json.tmp, which it syncs and renames over
// jobs.json before syncing the directory; then it removes the renamed
// journal. After a crash at any moment jobs.json is the old file or the new
// one, whole, and every change since the old one is in a journal file. A
// change made during the rewrite may or may not be in the new file, and is
// in the new journal: replaying a record over a state that already holds
// it changes nothing.
//
// Without Journal, Save and Delete return once a rewrite of jobs.json
// holding their change is on disk, and Record reaches the disk with the
// next rewrite. Rewrites are coalesced: a change starts one at once, unless
// one started less than FlushInterval ago; then it starts an interval
// after that one and carries every change made before it starts.
//
// [Store.Flush] writes what is queued (journal records and runs) and
// returns when it is on disk; [Store.Compact] rewrites jobs.json at once.
// When a write fails (a full disk), the waiting Save or Delete returns the
// error, the change stays in memory and the next rewrite holds it: a change
// reported as failed may still reach the disk later.
//
// # Start
//
// [New] reads jobs.json (mapped into memory where the platform can, with
// a decoder that does not use reflection, on two goroutines that each
// decode and convert half of the jobs array),
// replays the journal files in sequence order over it, skipping records
// cut short by a crash, and goes on appending to the journal: the start
// does not rewrite jobs.json (unless it had to set entries aside, see
// Recovery). It then opens runs.jsonl through runs.idx,
// reading only the lines appended after the index was written; a last
// line cut short by a crash is cut off. A store opened without Journal
// still replays journal files it finds, rewrites jobs.json and removes
// them.
//
// # Memory
//
// Each job is held once, in a compact entry (its fields, with those most
// jobs leave empty behind a pointer, and where its runs are in
// runs.jsonl): about 270 bytes beside its strings, which a [cron.Runner]
// loading from the store shares, and values that many jobs share (method,
// URL, durations...) are read once at start. Entries live in slabs of 1024,
// not as one object each. No copy of a job's JSON is kept: a rewrite
// encodes the jobs again. Run history is not held: [Store.Runs] reads it
// from runs.jsonl (the runs of the last FlushInterval come from memory).
// [Store.QueryRuns] (the history across jobs) scans an index of
// runs.jsonl held in memory, 48 bytes a run (with run ids of 32 hex
// digits, as a runner makes them): about 48 MB for 1M runs. A start
// restores it from runs.idx, or builds it in its read of runs.jsonl; after
// a compaction it is built in the background by one read of the file
// (batch by batch: writes go on meanwhile; a query asked before it is
// done waits for it). Each write of runs keeps it up. A page reads the index from its newest
// end and stops as soon as no older entry can enter it (runs are
// appended about in time order): the newest runs cost little, a page
// deep in the past or of a rare status up to a scan of the index; a
// query of up to 16 jobs reads those jobs' lines instead. Then one read
// per run returned. Config.RunHistory bounds the runs kept per job (50 by
// default): 1M runs are 20,000 jobs at the default, or fewer jobs with
// a larger RunHistory. [Store.RunByID] (one run by its id) finds it in
// the same index, scanned from its newest end, and reads its line.
// Journal records are held only until written, and a rewrite streams
// jobs.json through a 1 MiB buffer.
//
// # Recovery
//
// [New] reads jobs.json:
//
//   - no file: an empty store (and an empty jobs.json is written);
//   - a file that does not parse, or whose version is not 1: it is renamed
//     to jobs.bad.json, or to jobs.bad-<UTC timestamp>.json when that
//     exists (an earlier backup is never overwritten); an error is logged
//     naming the backup and the store starts empty;
//   - entries that parse but are invalid (a bad duration or time, a failed
//     [cron.Job.Validate], an empty or repeated id) are skipped, each with
//     an error log naming the id and the field ([EntryError]); the original
//     file is first copied to jobs.bad-<UTC timestamp>.json, so nothing is
//     lost, and then rewritten without them.
//
// [Store.Recovered] returns what was set aside (nil when the file was read
// whole), so that a caller without a logger learns of it too and can make
// it visible: the jobs concerned do not fire until the backup is restored.
//
// A line of runs.jsonl cut short by a crash is dropped; lines that do not
// parse or belong to no job are dropped by a compaction at start. A job
// deleted and created again under the same id may, after a crash and
// until the next compaction of runs.jsonl, show the runs of the job
// deleted: lines know their job by id only.
package jsonstore
