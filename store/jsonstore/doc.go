// Package jsonstore is the one-JSON-file job store of the timed-job service:
// a [cron.Store] (with the optional [cron.RunStore] and [cron.Flusher]) that
// keeps every job in memory and in a single file, jobs.json, in a data
// directory.
//
// # Files
//
// The data directory ([DirFromEnv]: $KSANA_DATA, else $DATA_DIR, else
// ./data) is created 0700 when missing and holds:
//
//   - jobs.json ([JobsFile]): what a user reads and may edit while the
//     service is stopped. The top-level object has "version" (1,
//     [FormatVersion]), "updated_at" and "jobs", an array of jobs in creation
//     order with exactly the fields of [cron.Job]'s JSON form. One job per
//     line keeps diffs readable.
//   - jobs.journal ([JournalFile]): with [Config.Journal], the durable
//     changes not yet in jobs.json (see below); empty after a rewrite.
//   - runs.jsonl ([RunsFile]): the run history, one [cron.Run] per line,
//     appended; the newest [Config.RunHistory] runs per job (default 50) are
//     kept and the file is compacted when it grows past twice that.
//   - jobs.lock ([LockFile]): empty; locked while a [Store] has the
//     directory open (see Locking below).
//
// They are created 0600.
//
// # Locking
//
// A data directory belongs to one open [Store] at a time. [New] takes an
// exclusive lock on jobs.lock, without waiting, before it reads or changes
// anything else in the directory (it only creates the directory and
// jobs.lock when they are missing), and [Store.Close] releases it. A second [New]
// on the same directory while the first store is open, from another process
// or from this one, fails at once with an error that names the directory
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
// # Writing: atomic rewrites with group commit
//
// Every rewrite of jobs.json writes a temporary file (jobs.json.tmp) in the
// same directory, syncs and closes it, renames it over jobs.json and syncs
// the directory: after a crash at any moment the file is the old one or the
// new one, whole.
//
// Changes are coalesced. A change starts a rewrite at once, unless one
// started less than [Config.FlushInterval] (default 50ms) ago: then the
// rewrite starts an interval after that one, and carries every change made
// before it starts. So a rewrite starts at most one interval after the
// first change not yet on disk, and there is at most one rewrite per
// interval however fast changes come: a burst of 10,000 changes costs a
// handful of rewrites, while a lone change is written at once.
// [Store.Save] and [Store.Delete] (a job created, changed, paused,
// resumed or deleted) return only when a rewrite holding their change is on
// disk. [Store.Record] (run bookkeeping) and [Store.AppendRun] return at
// once and reach the disk with the next rewrite. [Store.Flush] writes at
// once, and [Store.Close] writes the last changes before it returns.
//
// # The journal
//
// With [Config.Journal] (cmd/ksana sets it), Save and Delete do not wait for
// a rewrite: each appends one record (the whole job, or the id deleted) to
// jobs.journal ([JournalFile]) and returns once it is synced, a small write
// whatever the number of jobs. Appends commit in groups: the records of
// saves that arrive while a sync is under way go out together in the next
// write and share its sync. jobs.json follows with the next rewrite, which
// then truncates the journal, so it stays short and jobs.json stays what a
// user reads (at most one rewrite behind while the service runs; complete
// after a clean shutdown). After a crash, [New] replays the journal in
// sequence order over jobs.json, skipping a record cut short, and rewrites
// jobs.json at once. A store opened without Journal still replays a
// journal it finds, then removes it.
//
// Each job's JSON is cached and re-encoded only when the job changes, with
// an encoder that does not use reflection, so a rewrite of 100,000 jobs
// costs little more than the write itself.
//
// When a rewrite fails (a full disk), the waiting Save or Delete returns the
// error, the changes stay in memory and the next rewrite retries them: a
// change reported as failed may still reach the disk later.
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
// A line of runs.jsonl cut short by a crash is dropped.
package jsonstore
