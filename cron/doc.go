// Package cron runs timed jobs: schedules (once, every, cron expressions),
// the misfire rules, and the [Runner] that fires jobs from one min-heap
// with one timer goroutine and a fixed pool of workers. A job runs a Go
// function registered on the runner, or calls an HTTP URL through the
// [HTTPExecutor], each with a timeout and retries.
//
//	r, err := cron.New(nil, nil, cron.Config{}) // no store: the jobs live in the runner
//	...
//	r.Handle("report", cron.Func(func(ctx context.Context) error { return sendReport(ctx) }))
//	_, err = r.Add(ctx, cron.Job{Name: "report", Schedule: cron.Every(time.Minute), Type: "report"})
//	...
//	err = r.Run(ctx) // fires jobs until ctx ends, then drains and flushes
//
// A job ([Job]) is a schedule ([ScheduleSpec]: [Every], [At], [Cron]), a
// per-attempt timeout, a retry count and backoff, what it runs, and the
// bookkeeping the runner keeps (last_run_at, next_run_at, last_status,
// last_error). Its JSON form uses the field names of the jobs.json file,
// of the SQL stores and of the REST API (cron/httpapi): times RFC3339 in
// UTC, durations as strings such as "5s".
//
// # Go functions
//
// A job whose Type names a [Handler] registered on the runner
// ([Config.Handlers], [Runner.Handle]) is run by it: Handler.Run gets a
// context (the attempt's timeout, and the runner's cancellation at
// shutdown) and a [Call]: the job with its Args (JSON), the run's id, its
// scheduled and trigger times, and the attempt's number. [Func] adapts a
// plain func(ctx) error, [Typed] decodes the args into a struct. An error
// fails the attempt and is retried as the job says, unless it is
// [Permanent]; a panic fails it too. Retries, timeouts, overlap skips,
// misfires, run history and the [Observer] work as for HTTP jobs.
//
// A store keeps the type's name and the args, not the function. A stored
// job whose type has no handler when the runner loads it is kept and logged,
// [Runner.Unhandled] counts it, and each of its runs fails with the reason
// until a handler for it is registered. A new job of such a type is
// refused (a [ValidationError] on "type").
//
// # HTTP callbacks
//
// A job of type "http" (the default) calls its HTTP config (method, URL,
// headers, body) through the runner's [Executor], by default an
// [HTTPExecutor] (see "The HTTP callback" below).
//
//	_, err = r.Add(ctx, cron.Job{Name: "ping",
//		HTTP:     cron.HTTPConfig{URL: "https://example.com/ping"},
//		Schedule: cron.Every(5 * time.Minute)})
//
// The program examples/gofunc schedules a Go function; examples/every
// (go run ./examples/every) schedules a few HTTP jobs against a local
// callback server and prints them firing.
//
// # Schedules
//
// A [Schedule] is a pure function: Next(after) returns the first run time
// strictly after after, or the zero time when there is none. [ScheduleSpec]
// (kind "once", "every" or "cron") builds one with [ScheduleSpec.Build].
//
//   - kind "once" ([At]) runs a single time, at run_at.
//   - kind "every" ([Every]) runs on the grid start_at + k*every. The next slot is computed
//     from the grid, never from when a run finished, so a schedule does not
//     drift however long its runs take. A job added without start_at gets
//     the time of the Add. Jitter, below the interval, delays each run by an
//     offset in [0, jitter) without moving the grid; the offset is a hash of
//     the job id and the slot, so it is the same after a restart.
//   - [CronSchedule] runs at the times a cron expression matches (below).
//
// To see when a schedule will fire, [ScheduleSpec.Next] checks a spec and lists its times (in UTC,
// a cron spec computed in its zone), [Runner.Next] lists a job's (paused
// or not, with its own jitter) and [Runner.Preview] checks a spec as
// [Runner.Add] would, the runner's minimum interval included, and lists
// its times without adding a job. Each lists at most [MaxPreview] times.
//
// # Cron expressions
//
// [ParseCron] reads five fields (minute hour day-of-month month
// day-of-week) or six with seconds first; names JAN-DEC and SUN-SAT; lists,
// ranges and steps; ? in the day fields; Quartz's L, W and # in the day
// fields; the descriptors @yearly, @annually, @monthly, @weekly, @daily,
// @midnight, @hourly and @every <duration>; and a CRON_TZ= or TZ= prefix.
// The two day fields combine as in Vixie cron: when both are restricted a
// day matches either, and when one of them starts with * (or is ?) a day
// must match both, so "0 0 */2 * MON" runs on Mondays that fall on odd days.
// The location defaults to UTC (a job's schedule.tz sets it). A
// parse error names the field and the token, as in
// "cron: hour field: 25 is out of range [0,23]". [CronSchedule] documents
// the syntax in full.
//
// # Daylight saving
//
// A cron schedule runs at wall-clock times in its location. A wall time
// skipped by a spring-forward runs once, at the first instant after the gap;
// a wall time that occurs twice in a fall-back runs once, at its first
// occurrence. Schedules that cover all 24 hours follow the clock as it is.
// [CronSchedule] gives the details and examples in America/New_York,
// Europe/Berlin and Australia/Lord_Howe. Once and every schedules count
// absolute time and ignore daylight saving.
//
// # Misfires
//
// A slot is misfired when the runner sees it later than
// [Config.MisfireTolerance] (default 1s): at start-up ([Runner.Load]) for
// slots that passed while the process was down, and whenever the timer
// goroutine wakes late, after a suspend or under overload. The rules:
//
//   - a once job past due is marked missed and never runs;
//   - an every or cron job rolls on to its next future slot, with no
//     catch-up of the slots in between;
//   - opt-in, a job's misfire_grace (default 0: off) lets
//     a slot missed by less than the grace still run once, at once.
//
// # The runner
//
// A [Runner] keeps every job in memory in a compact form, with one 4-ary
// min-heap keyed by next_run_at. The heap holds the jobs due within about a
// second; a job due later waits, unsorted, in a slot of a two-level timing
// wheel (slots of about a second for the next 73 to 146 minutes, slots of
// about 73 minutes for the next 208 days, a list beyond), and enters the
// heap when the clock reaches its slot. A fire therefore sifts a small heap
// and parks the job's next run with an append, whether the runner holds a
// thousand jobs or a million (BenchmarkFireScaling measures the ratio).
// One timer goroutine sleeps until the
// earliest deadline (at most a second at a time, so that a wall clock that
// jumps is noticed) and hands due runs to a fixed pool of workers
// ([Config.Workers], default 4). A change that moves the earliest deadline
// (Add, Update, Resume) wakes it at once. Its methods are safe for
// concurrent use.
//
//   - [Runner.Add], [Runner.Update], [Runner.Remove], [Runner.Pause] and
//     [Runner.Resume] write the job to the [Store] durably before they
//     return, then update the heap. Writes to one job are applied one at a
//     time, in the same order in the store as in memory; writes to
//     different jobs wait for the store side by side, so a store that
//     commits in groups (store/jsonstore) makes them durable together.
//     [Runner.Update] applies a caller's change to a job under that job's
//     lock (a read-modify-write, such as a PATCH of the REST API).
//   - [Runner.RunNow] queues a run at once; next_run_at does not change.
//     It may change that run's body, headers or args ([RunOptions]) and,
//     unless forced, refuses a job with a run in flight ([ErrInFlight]).
//   - A slot that comes while the job's previous run is still queued or
//     running is not run: it is recorded as skipped (last_status, the run
//     history and the observer) and the job rolls on to its next slot.
//   - Each run gets an id of 128 random bits in hex, the same across its
//     retries; its bookkeeping (last_run_at = when it started,
//     last_status, last_error, next_run_at) goes to [Store.Record] from one
//     recorder goroutine, newest state last, and the run itself to
//     [RunStore.AppendRun] when the store keeps history.
//   - The status words, in the API and the stores alike: success, failed,
//     timeout, skipped, paused, missed.
//
// [Runner.Run] calls [Runner.Load] if that was not done, then fires jobs
// until its context ends. Then nothing new is dispatched (runs still
// waiting for a worker are dropped), runs in flight get
// [Config.DrainTimeout] (default 30s) to finish and are then cancelled
// through their context, the pending bookkeeping is written, and the store
// is flushed ([Store].Flush).
//
// The runner's guarantees are at most once per slot in a process, and no
// exactly-once across a crash: a run that was in flight when the process
// died is not retried, and its slot is treated by the misfire rules at the
// next start. Callbacks should be idempotent on X-Ksana-Run-Id.
//
// # The HTTP callback
//
// [HTTPExecutor] makes each run's request with one shared [http.Client]
// (defaultHTTPClient: MaxIdleConns 100, IdleConnTimeout 90s,
// TLSHandshakeTimeout 10s, ExpectContinueTimeout 1s). Every request carries
// X-Ksana-Job-Id, X-Ksana-Run-Id, X-Ksana-Scheduled-At and
// X-Ksana-Triggered-At (RFC3339Nano, UTC) after the job's own headers
// (a "Host" header sets the request's host). When the job sets no
// Content-Type and its body starts like JSON ("{" or "["), the
// Content-Type is application/json. The body's placeholders {{job_id}},
// {{run_id}}, {{scheduled_at}} and {{triggered_at}} are replaced on each
// run (times in RFC 3339 UTC with nanoseconds; values inserted as they are,
// without quoting).
//
// Each attempt is bounded by the job's timeout (default 10s) through its
// context. A 2xx answer is success. 408, 429, 5xx, timeouts and connection
// errors are retried up to max_retries times (0: no retry), waiting
// retry_backoff (default 5s) between attempts, or the Retry-After of a 429
// or 503 answer (seconds or an HTTP date) when that is longer, capped by
// [HTTPExecutorConfig.MaxRetryAfter] (default 5m). Other 4xx answers fail
// at once. The final status is success, timeout (the last attempt timed
// out) or failed; last_error holds a short reason: "http 503: " and the
// first 200 bytes of the body, or the error. Response bodies are read up to
// [HTTPExecutorConfig.MaxBodyBytes] (default 64 KiB) and drained so that
// connections are reused.
//
// [HTTPExecutorConfig.AllowHosts], a [HostAllowList], says where callbacks
// may go; [Config.AlertAllowHosts] does the same for alerts. Its patterns
// are host names ("api.example.com", "*.internal", "*"), IP addresses
// ("10.1.2.3", "fd00::1") and CIDR blocks ("10.0.0.0/8"). A URL whose
// host is a name must match a name pattern; one whose host is an IP
// literal must be named by an address or CIDR pattern (an IPv4-mapped
// IPv6 address is judged as IPv4), and one with an IPv6 zone never
// passes. The host is checked before the first request and before each
// redirect is followed, and the address actually dialed, after DNS, is
// checked on every connection: a loopback (127.0.0.0/8, ::1), link-local
// (169.254.0.0/16, fe80::/10) or unspecified (0.0.0.0, ::) address is
// refused unless an address or CIDR pattern names it, so that neither a
// name that resolves there nor a redirect reaches it.
// [HTTPExecutorConfig.AllowLoopback] lets callbacks to an allowed name
// reach loopback. A refused request or connection fails the run at once,
// without a retry, with an error that names the host or address ("address
// 127.0.0.1:8000 refused: a loopback address the callback allow-list does
// not name"). With a list, the executor dials directly (no proxy from the
// environment). An empty list, the default, checks nothing.
//
// # Stores
//
// The runner reads and writes jobs through [Store], declared here and
// implemented by adapters: store/jsonstore in one JSON file,
// store/sqlstore in PostgreSQL or SQLite, and [MemStore]
// in memory, for tests of code that works through a Store. Save and Delete
// are durable; Record (bookkeeping) and [RunStore.AppendRun] may be
// batched, and [Store].Flush makes them durable at shutdown. Every
// adapter passes the conformance suite store/storetest.TestCronStore.
//
// A [RunStore] answers [Runner.QueryRuns]:
// the runs of every job, filtered ([RunQuery]: jobs, statuses, a window
// of scheduled_at, an instance) and paged newest first by a
// [RunCursor]. Every slot has a record: the runs called, and the slots
// not called, skipped or missed, each with a [Run.Reason]. A burst of
// consecutive slots not called for one reason is one record, its
// ScheduledAt the first slot and [Run.Slots] their count: the slots
// passed while the runner was down ([ReasonDowntime], or
// [ReasonNoHolder] for a job taken over from another runner), those
// skipped while one run was in flight ([ReasonOverlap], recorded when it
// ends), and those passed while the job was paused ([ReasonPaused],
// recorded when this runner resumes a job it paused), and those held back
// by a pause of the whole service ([ReasonServicePaused], recorded at the
// job's first slot called after it, or when the runner stops; the slots
// that pass while the runner is down during such a pause are the
// pause's too, not missed). To check that every slot of a job is there,
// add up its records from GET /jobs/{id}/runs (or [Runner.QueryRuns]),
// counting each as max(slots, 1): the sum is the number of the
// schedule's slots over that time.
// It also answers [Runner.RunByID]: one record by its run id (the
// id [Runner.RunNow] returns), whichever job it belongs to. A record of a
// run that was called says what started it ([Run.Trigger]: a slot of the
// schedule or a run-now, with [Run.TriggeredBy], the actor that asked).
//
// A runner needs no store: New(nil, ...) keeps its jobs in the runner
// alone, at the runner's own cost in memory (a MemStore would keep a second
// copy of every job), and the newest [Config.RunLimit] runs of each job for
// [Runner.Runs]. Nothing survives the process.
//
// While the runner runs, one recorder goroutine writes run bookkeeping
// ([Store.Record]) and run records ([RunStore.AppendRun]): the workers and
// the timer goroutine hand it their results, and it shows each run to the
// observer once the run is in the history.
//
// # Pauses
//
// [Runner.Pause] stops one job, with a zero until until it is resumed, or
// until a time (its [Job.PausedUntil]), when the runner that fires the job resumes it
// by itself, as [Runner.Resume] would: after a restart too, and over a
// shared store whichever runner holds the job then. The job keeps when it
// was paused ([Job.PausedAt]), so that whoever resumes it records the
// slots passed meanwhile as one skipped run of reason [ReasonPaused]:
// after a restart, or over a shared store a runner that does not hold the
// job, as well as the one that paused it. A slot claimed ahead of its
// time ([Config.ClaimAhead]) when the pause comes still runs, and the
// pause counts from after it. [Runner.PauseAll]
// pauses the whole runner (maintenance), optionally until a time and with
// a reason, without touching any job's enabled flag: the slots that come
// meanwhile are never called, and are recorded as one skipped run per job
// (reason "service paused", [Run.Slots] their number), and [Runner.RunNow] returns [ErrServicePaused];
// [Runner.ResumeAll] ends it and [Runner.Paused] reports it. A store that
// is a [PauseStore] keeps that pause across restarts and, shared, hands
// it to every runner within [Config.PauseRefresh].
//
// A store may also keep the audit log the runner writes, one record per
// change ([AuditLog], [AuditEntry]). It may keep the idempotency keys of
// run-now requests ([IdempotencyStore]), so that a key
// ([RunOptions.IdempotencyKey], cron/httpapi's Idempotency-Key) holds for
// every process sharing the store and across restarts; without one the
// runner keeps them in its own memory.
//
// # Sharing a store among runners
//
// Several runners (several processes) may share one store, such as
// store/sqlstore's Jobs on one database. Such a store is a [SharedStore].
// The runner works through that one contract whatever its store: any
// other store (or none) is, to the runner, a shared store with one
// member, which holds every job, owns every partition and wins every
// claim at once, so that nothing is claimed ahead and the reads of every
// job are answered from the runner's own table. What follows is what
// changes when there are several members.
//
// Over a shared store each runner holds only the jobs it fires
// ([SharedStore.Owns]): the store's side loads them into the runner with
// [Runner.Hold] as it gains them and forgets them with [Runner.Drop] as it
// loses them (also how the other runners' writes reach this one, without
// writing the store back), and [Runner.Add] of a job another runner fires
// stores it without holding it, refused with [ErrExists] when any runner
// stored the id. The API still sees every job: the store answers
// [Runner.Get] (and the reads of [Runner.Update], [Runner.Pause],
// [Runner.Resume], [Runner.Remove] and [Runner.RunNow] of a job not held,
// which then change the store under the same validation, for the owner to
// take up), [Runner.List] in the one creation order, and [Runner.Count];
// when it cannot, their errors wrap [ErrUnavailable]. A run-now of a job
// not held is called by the runner that received it, from the stored job.
// A shared store that is a [RunCounter] counts the runs in flight on the
// other runners, so that [Runner.RunNow] refuses a job running
// anywhere ([ErrInFlight]) unless forced. [Runner.Len] and [Runner.IDs]
// are of the jobs held.
//
// Each run is claimed in the store before it is called, and a second
// claim of a slot loses, so that a slot is called at most once across the
// runners, even by a runner that lost its ownership without knowing yet.
// A shared store lives in a database, where a round trip costs far more
// than the firing of a slot. So the runner claims each slot ahead of its
// time ([Config.ClaimAhead], 250 ms by default): the timer goroutine takes
// the slot that long before it is due, a claiming goroutine claims every
// slot taken in a fifth of that time in one call, and each slot won goes
// to a worker exactly at its time. A slot whose claim is still out at its
// time waits for it; a slot claimed by a runner held up past
// MisfireTolerance before its time came (a stopped process) is recorded
// as missed ("holder stopped"), not called late; a runner that stops
// calls the slots it has taken before Run returns, and so does a runner
// that drops a job (its partition moved to another runner): every slot
// claimed is called or recorded by its claimer. The recorder writes the
// bookkeeping and runs in one call per kind, every [BatchEvery], and
// writes each job's bookkeeping with the version of the job it was
// computed from, which the store checks, so that an acknowledged write
// of a job is never overwritten by the bookkeeping of an earlier run.
// Over such a store the database costs a firing no round trip, and fewer
// statements than slots.
//
// # Alerts
//
// A job's [AlertConfig] (or the runner's [Config.Alert], for the jobs
// without one) names a webhook that is told when a run changes the job's
// health: failing on the first failure, failing_streak after
// [AlertConfig.After] failures in a row, recovered on the success that
// follows alerted failures, and paused when [AlertConfig.PauseAfter]
// failures in a row have paused the job (durably, as [Runner.Pause]
// does); and missed when slots of the job are recorded missed (the
// runner was down, no runner held the job, a once job was past due, its
// holder died or stopped), with their count and reason, at most once per
// [AlertConfig.MissedEvery] for a job. A job that asks for it
// ([AlertConfig.Notify]) is also told of each run that is no transition
// ([AlertRun]): each failed one, or each one. The alert is a POST of an [Alert]
// as JSON, signed with HMAC-SHA256 ([SignAlert], [VerifyAlert]) anew at
// each attempt, and naming its delivery in the [AlertDeliveryHeader],
// the same on every attempt, so that a receiver drops a repeat. Neither
// the timer nor the workers wait for it: the recorder writes each alert
// to the store's [AlertOutbox] with the run that raised it, and a
// goroutine of its own delivers it, retried with a doubling backoff
// ([Config.AlertBackoff], up to [MaxAlertBackoff] between attempts) for
// [Config.AlertHorizon] (a day by default): a webhook down for hours
// gets its alerts when it is up, and a runner started again on the store
// delivers what its predecessor did not. An alert past its horizon, or
// refused for good (a 4xx but 429), is dead: kept in the outbox and
// listed by [Runner.Alerts], up to [MaxDeadAlerts]. Over a store without
// an outbox the alerts wait in the runner's memory, with the same
// retries, and are lost when it stops. The failures
// in a row and the last transition alerted are bookkeeping
// ([Job.Failures], [Job.LastAlert]) that the stores keep, so that a
// change is alerted once, across restarts; the run that caused it
// carries it in [Run.Alert]. Over a shared store every runner delivers
// from the one outbox; each delivery is taken by one runner at a time,
// under a lease. A delivery that ends (delivered or dead) is logged, and
// told to a [Config.Observer] that is an [AlertObserver].
//
// # Who may do what: actors, the audit log and secrets
//
// Every change of a job or of the service goes through the [Runner]
// methods that make it ([Runner.Add], [Runner.Update], [Runner.Remove],
// [Runner.Pause], [Runner.Resume], [Runner.RunNow], [Runner.PauseAll],
// [Runner.ResumeAll]), whoever
// asks: the REST API (cron/httpapi), the console (cron/console), Go code
// of the embedding program, or the runner itself. Each one, in one
// place:
//
//   - is made for the [Actor] of its context ([WithActor]): the API and
//     the console put there the caller they authenticated; a context
//     without one is the embedding program ([ActorLocal]); the runner's
//     own changes (the pause of a job after failures, the end of a timed
//     pause of a job or of the service) are [ActorRunner]'s;
//   - is authorized first by [Config.Authorizer] ([RoleRules] by
//     default: [Action.NeedRole] names the role each [Action] needs), and a
//     refusal is a *[ForbiddenError] that changes nothing; front ends ask
//     [Runner.Authorize] beforehand to refuse early or to offer only what
//     a user may do;
//   - writes exactly one [AuditEntry]: the actor and its role, the
//     action, the job before and after with its secrets hidden, the run a
//     run-now queued and its options (values hidden), a replay marked as
//     such. [Runner.Audit] reads the log ([Config.AuditLog], the store's
//     when it keeps one);
//   - keeps run-now idempotent under [RunOptions.IdempotencyKey].
//
// One secrets rule, [Job.RedactedFor], decides what each role sees of a
// job: an admin everything; every other role, the audit log, the logs
// and the alert payloads no header value, no user name, password or query
// value of the callback and alert URLs, no body, no args and no alert
// secret; a viewer also no excerpt of a callback's reply
// (redactError). The runner stores the errors of runs with the job's
// secrets taken out ([Job.ScrubText]), so that a target that echoes the
// request does not put a credential in the history. [RedactURL] hides
// the secrets of a URL in a log record.
//
// # Observing runs
//
// [Config.Observer] sees every finished run as a [Run]: scheduled,
// triggered and finished times, status, attempts, HTTP status, error,
// latency, and [Run.Lag] (triggered minus scheduled); skipped and missed
// slots come through it too, with no attempts. It is the hook for metrics:
// the package has no metrics dependency. [Config.Logger] receives
// structured records with job_id, name, status, latency_ms and error.
package cron
