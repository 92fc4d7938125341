// Package httpapi is the REST management API of the timed-job service: an
// http.Handler over a [cron.Runner], mountable in any service. cmd/ksana
// serves it on the JSON file store.
//
// # Endpoints
//
//	POST   /jobs                 create a job: 201 and the job (Location: /jobs/{id})
//	GET    /jobs                 the jobs, in creation order: 200 and an array (paging and filters below)
//	GET    /jobs/{id}            one job: 200
//	PATCH  /jobs/{id}            change the fields present: 200 and the job
//	DELETE /jobs/{id}            204
//	POST   /jobs/{id}/run-now    queue a run at once: 202 and {"run_id", "job_id"} (body and Idempotency-Key below)
//	POST   /jobs/{id}/pause      enabled=false (?until=T: until then): 200 and the job
//	POST   /jobs/{id}/resume     enabled=true: 200 and the job
//	GET    /jobs/{id}/runs       the newest runs, newest first (?limit=N, default 50; ?status=failed...)
//	GET    /runs                 the run history of every job, newest first: 200 and an array (filters and paging below)
//	GET    /jobs/{id}/next       the next run times (?n=N, default 10, max 1000): 200 {"job_id", "paused", "kind", "tz", "next"}
//	POST   /schedules/preview    check a schedule and list its next run times, creating nothing: 200 {"next"}
//	GET    /audit                the audit log of writes (?job_id=, ?who=, ?since=, ?after=, ?limit=): 200 and an array
//	POST   /pause                pause the whole service (?until=T, ?reason=): 200 {"paused", ...}
//	POST   /resume               end the service pause: 200 {"paused": false}
//	GET    /health               200 {"status":"ok"} (and the service pause), never authenticated
//	GET    /openapi.json         the OpenAPI 3 document of the API
//	GET    /metrics              [Config.Metrics] (Prometheus text in cmd/ksana)
//
// Jobs are read and written in the JSON form of [cron.Job]. On POST /jobs
// the id may be empty (the runner generates 128 random bits in hex); a
// given id holds 1 to 128 letters, digits, '-', '_', '.' or ':' and is
// not "." or ".." (see [cron.Job]);
// enabled defaults to true, max_retries when absent to
// [Config.DefaultMaxRetries] (3) while an explicit 0 means no retries, and
// the other defaults are the runner's. A PATCH body is a JSON merge patch
// (RFC 7396) of the job's JSON form, at every depth: only the fields sent
// change, an object (http, schedule, headers) merges field by field, and
// null removes a field, which then takes its default as on create. A
// schedule whose kind differs from the job's replaces the schedule whole
// ({"schedule":{"kind":"cron","cron":"0 * * * *"}} on an every-job drops
// every, start_at and jitter); one of the same kind merges. A once job
// whose run_at has passed (by more than [PastRunAtTolerance] and its
// misfire_grace) would be recorded as missed and never run: POST, and a
// PATCH that sends a schedule, refuse it with 400 naming schedule.run_at.
// A write
// answers only once the change is durable in the runner's store. run-now
// leaves next_run_at as it was.
//
// # Run now
//
// POST /jobs/{id}/run-now takes no body, or an object that changes that
// run only: {"body": "...", "headers": {...}} for an HTTP job (the body
// replaces http.body, the headers are set over http.headers), {"args":
// ...} for a Go function job, and "force". A job with a run queued or
// running on the instance that answers, or over a shared store that
// counts them ([cron.RunCounter], as store/sqlstore does) running on
// another instance, is 409 with code [CodeRunInFlight] unless "force" is
// true. An Idempotency-Key header
// (1 to 255 printable ASCII characters) makes the request safe to send
// again: the same key for the same job within [IdempotencyWindow] answers
// 202 with the first request's run_id and Idempotent-Replayed: true,
// without a second run; the same key with another body is 422 with code
// [CodeIdempotencyKeyReused]. The runner keeps the keys
// ([cron.RunOptions.IdempotencyKey], [cron.Config.Idempotency]), so that
// the console and Go callers get the same rule: with store/sqlstore every
// instance sharing the database reserves in the same table, so a repeat
// that a balancer sends to another instance, or that comes after a
// restart, answers as the first request did; with store/jsonstore or
// [cron.MemStore], whose keys live in memory, the keys are those of the
// process that answered, at most [cron.DefaultIdempotencyKeys], the
// oldest dropped first, forgotten by a restart.
// A request that failed keeps no key: it may be sent again. A repeat sent
// while the first request is still being answered, here or on another
// instance, waits for its answer up to 10 seconds, then answers 409
// (field Idempotency-Key; send it again later); a key left without a run
// for 5 minutes (its request never finished: its instance stopped) is
// taken over by the next request (times are those of the instances'
// clocks, which are expected to agree within a minute). If the store
// cannot be asked, the answer is 503 with Retry-After and nothing runs. A
// key that is too long or not printable is 400 before the store is
// asked.
//
// # Go function jobs
//
// A job's type is "http" (the default: an HTTP callback, described by its
// http object) or the name of a Go function registered on the runner
// ([cron.Runner.Handle]). A job of another type has no http object and may
// carry args, any JSON value, handed to its function:
//
//	POST /jobs {"name": "report", "type": "report", "args": {"team": "core"},
//	            "schedule": {"kind": "every", "every": "1h"}}
//
// Such jobs are created, listed (type=report), changed, paused and run like
// any other. A new job of a type that no handler of the runner runs, or a
// change of a job to such a type, is a 400 on field type; a stored job of
// such a type may still be changed (PATCH), paused and resumed: the
// handler is needed to run it, not to store it. http on a job of another
// type, and args on an http job, are a 400 on the field.
//
// # Listing jobs
//
// GET /jobs answers every job unless asked for less. limit=N (1 to
// [MaxListLimit]) returns a page of N, and when more jobs follow, a
// header Link: <?after=ID&...>; rel="next" gives the next page (after is
// the id of the last job of the page; a page may come back short, or
// empty, when filters skip jobs). The filters, combined with AND:
// enabled=true|false, kind=once|every|cron, last_status=success|failed|
// timeout|skipped|paused|missed (or empty: never run), name=<exact name>,
// type=<job type>.
// Any other query parameter, or one given twice, is a 400 naming it.
//
// # Run history across jobs
//
// GET /runs answers the run records of every job, newest first (by
// scheduled_at, then run_id), a page of 50 unless limit=N (1 to
// [cron.MaxRunQueryLimit]) says otherwise. When more runs follow, a
// header Link: <?after=CURSOR&...>; rel="next" gives the next page. The
// filters, combined with AND: job=<id> and status=success|failed|
// timeout|skipped|missed (each repeatable, or a comma-separated list: any
// of them), since=<RFC 3339> (scheduled at or after), until=<RFC 3339>
// (scheduled before), instance=<name> (claimed by that instance of a
// shared database). Every slot appears: the runs called, and the slots
// not called as skipped or missed with their reason (downtime, overlap,
// no holder, paused, service paused, holder died, holder stopped, claim
// failed, past due); a burst of consecutive slots not called for one
// reason is one record whose slots field counts them. Any other
// parameter, a bad value, or a parameter other than job and status given
// twice is a 400 naming it; a store that keeps no history answers 501.
//
// GET /runs/{run_id} answers one record by its run id, whichever job it
// belongs to: the run_id of a record, or the one a run-now answered. It
// is a 404 while that run is queued or in flight (its record is written
// when it ends), and for an id no kept record has. A record says what
// started a run that was called: trigger "schedule" (a slot) or
// "run-now", with triggered_by, the name of who asked (a token's name).
//
// # Previewing schedules
//
// GET /jobs/{id}/next?n=10 lists the job's next n run times (n from 1 to
// [cron.MaxPreview], default [DefaultPreview]) in UTC, RFC 3339; a cron
// schedule is computed in its time zone, so a daily 09:00 in Europe/Paris
// moves by an hour in UTC across a change of summer time, and an every
// schedule lists its jitter. A paused job lists the times its schedule
// gives and says "paused": true; it fires none of them until resumed. A
// once job that has run lists none. Its only query parameter is n.
//
// POST /schedules/preview takes {"schedule": {...}, "n": 10, "id": "..."}
// (n and id optional), checks the schedule exactly as POST /jobs checks a
// job's (the same 400s, naming the same fields: schedule.cron,
// schedule.tz, schedule.run_at of a once schedule already past, ...) and
// lists its next n times without creating a job. An every schedule
// without start_at starts now, as a job created now would; id, when
// given, spreads its jitter as the job of that id would.
//
// # Pauses
//
// POST /jobs/{id}/pause pauses a job; with until (an RFC3339 time in the
// query, ?until=, or in a JSON body {"until": ...}), the job's
// paused_until is set and the runner resumes it by itself at that time
// ([cron.Runner.Pause]); an until not in the future is 400 naming
// until. paused_until is a system field: a create or PATCH that sends it
// is 400, a PATCH keeps it while the job stays paused, and a resume or a
// plain pause clears it. A paused job's paused_at ([cron.Job.PausedAt])
// says when it was paused: a system field as well, kept while the job
// stays paused and cleared by the resume, whose instance records the
// slots passed since as one skipped run of reason "paused".
//
// POST /pause pauses the whole service ([cron.Runner.PauseAll]) with an
// optional until and reason (query or body {"until", "reason"}): no slot
// of any job is called (each is recorded as a skipped run with the error
// "service paused") and run-now answers 409, while every job keeps its
// own enabled. POST /resume ends it. While it lasts, GET /health adds
// "paused": true, "paused_until", "pause_reason" and "paused_at".
//
// # Tokens and roles
//
// With [Config.Token] or [Config.Authenticator] set, every endpoint but
// /health needs "Authorization: Bearer <token>". Each token has a [Role]:
//
//   - viewer: every GET and HEAD, and POST /schedules/preview (it changes
//     nothing);
//   - operator: also POST /jobs/{id}/run-now, /pause and /resume;
//   - admin: everything, POST /jobs, PATCH and DELETE /jobs/{id} too, the
//     service pause (POST /pause and /resume), which stops every job, and
//     a run-now header that replaces one the job sets.
//
// The API authenticates; the runner authorizes: every change is made for
// the token's identity ([cron.WithActor]) and the runner's
// [cron.Authorizer] decides ([cron.RoleRules] by default), so that the
// console and Go code are held to the same rules. [Config.Token] is one
// admin token, named "admin" in the audit log. A [TokenSet] holds a list
// of tokens and can be replaced while requests are served (cmd/ksana
// reads it from a file and reloads it on SIGHUP); an embedding service
// may give its own [Authenticator]. Tokens are compared by their SHA-256
// in constant time, and never logged. A token no one holds gets 401; a
// token whose role is too small gets 403 with {"error": "...", "role":
// "<the role needed>"}.
//
// Wrong tokens are throttled per client address: after
// [GuessBurst] failures an address may try again [GuessRate] times a
// second; until then it gets 429 with Retry-After, whatever token it
// sends, while other addresses are not slowed down. Failures are logged
// at most once a minute per address, with their count, never with the
// token. The console's sign-in counts against the same addresses
// ([Server.Authenticate]).
//
// What a token reads follows the runner's secrets rule
// ([cron.Job.RedactedFor]): an admin reads jobs whole; any other role
// reads them with every header value, the user name, password and query
// values of the callback and alert URLs, the body, the args and the
// alert's secret as "(hidden)", and a viewer reads no excerpt of a
// callback's reply in last_error and in the runs.
//
// # Writes from browsers
//
// Every write (POST, PATCH, DELETE) must say Content-Type:
// application/json, with or without a body: a web page of another site
// can send a form or a no-cors fetch without asking the browser first,
// but not that. A write whose Sec-Fetch-Site or Origin says it comes from
// another site gets 403. Without a token, [Config.AllowedHosts] (when
// set) lists the Host headers the API answers; another gets 421, reads
// too, so that a page of another site that resolves its own name to this
// address (DNS rebinding) reads nothing. No-token mode is for a service
// reachable from trusted hosts only, such as a trial on one machine.
//
// # Audit log
//
// The runner records every change, whoever made it ([cron.AuditEntry]:
// who, its role, the action, the job, the job before and after with its
// secrets hidden, for a run-now its run, its options with their values
// hidden and whether it replayed an earlier one; for pause-all and
// resume-all the service pause before and after). GET /audit lists them
// oldest first, to any role (a viewer may read the jobs anyway):
// job_id=<id> keeps one job's, who=<name> one actor's, since=<RFC3339
// time> those made from then on, after=<entry id> those that follow,
// limit=N (default [DefaultAuditLimit], at most [MaxListLimit]) bounds
// the page, with a Link: <?after=ID&...>; rel="next" header when more
// follow. The runner keeps the log in its store when the store has one
// ([cron.Config.AuditLog]).
//
// # Errors
//
// Every error is a JSON object {"error": "...", "field": "...", "code":
// "..."} (field only when one field is at fault, named as in the job's
// JSON, dotted: "schedule.every"; code only for [CodeRunInFlight] and
// [CodeIdempotencyKeyReused]):
//
//   - 400: malformed JSON, a body that is not an object, an unknown field,
//     a system field on input (last_run_at, next_run_at, last_status,
//     last_error, failures, last_alert), a value of the wrong type, every validation failure
//     ([cron.ValidationError]), a callback host outside
//     [Config.CallbackAllow];
//   - 401: authentication is on and the request lacks
//     "Authorization: Bearer <token>" with a token known;
//   - 403: the token's role is too small ({"error", "role"}, see above);
//     a write from another site;
//   - 404: an unknown id or path;
//   - 405: a method the path does not take, with an Allow header;
//   - 409: a create with an id already in use; a run-now of a job with a
//     run in flight (code run_in_flight); a run-now whose Idempotency-Key
//     is held by a request not answered within 10 seconds;
//   - 413: a body over [Config.MaxBodyBytes] (1 MiB);
//   - 415: a write without Content-Type: application/json;
//   - 421: a Host outside [Config.AllowedHosts] (no token);
//   - 422: an Idempotency-Key sent again with another body (code
//     idempotency_key_reused);
//   - 429: too many wrong tokens from this address (with Retry-After);
//   - 503: the runner is shutting down; a shared store's database cannot
//     answer (with Retry-After).
//
// A rejected request changes nothing.
package httpapi
