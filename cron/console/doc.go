// Package console is the web console of the timed-job service: an
// http.Handler over a [cron.Runner] that serves HTML pages to see and
// manage its jobs, mountable under any path of any Go service. cmd/ksana
// serves it at /ui/.
//
//	api, _ := httpapi.New(runner, httpapi.Config{Authenticator: tokens})
//	mux.Handle("/jobs-ui/", console.New(runner, console.Config{API: api}))
//
// # Pages
//
// The paths below are relative to where the console is mounted.
//
//	GET  /                    overview: jobs by state and kind, charts of the runs of every job by status
//	                          (per minute over the last hour, per hour over the last day), failing
//	                          jobs, the next runs, the instance, and for an admin the service-wide
//	                          pause (until, reason) or its resume
//	GET  /jobs                the jobs, a page at a time, with a search (?q= part of the id or the name,
//	                          any case), filters (status, kind, type, enabled, paused_until=true: the
//	                          jobs paused until a time) and their totals ("1,234 jobs, 12 paused").
//	                          In creation order it pages with ?after=<id>, and keeps the cursors of
//	                          the pages before as repeated ?prev=, so that it links back and numbers
//	                          its pages; ?sort=id, name, next (next run), last (last run) or status
//	                          (last status, failures first), "-" before one to reverse it, sorts the
//	                          jobs by the column and pages with ?page=<n>. A bad value is a 400
//	                          naming the parameter
//	GET  /jobs/{id}           one job: its schedule in words and as written, its next 10 times in its
//	                          zone and in UTC, the end of its pause, its alert settings, failures in a
//	                          row and last alert, its history (status, attempts, HTTP status, latency,
//	                          lag, error, the reason and slots of a skipped or missed record, the
//	                          alert a run sent), a chart of the duration and the lag of its latest
//	                          100 runs, and the audit of its changes
//	GET  /jobs/{id}/history   the history part of the job's page alone (the page reloads it)
//	GET  /runs                the runs of every job, newest first, with the API's filters (job, status,
//	                          since, until, instance) and a page at a time (?after=<cursor>, with the
//	                          cursors before as ?prev=, to page back)
//	GET  /runs/{run_id}       one run: its status, trigger (a slot of the schedule, or a run-now and who
//	                          asked), scheduled, triggered and finished times, lag, latency, attempts,
//	                          HTTP status, error, instance, the reason and slots of a skipped or missed
//	                          record, and the alert it sent; every run row of the other pages links to
//	                          it, and marks a run-now as such
//	GET  /new                 the form of a new job; POST creates it
//	GET  /jobs/{id}/edit      the form of a job; POST saves it
//	POST /jobs/{id}/run       run now, with optional overrides (body, headers as "Name: value" lines,
//	                          args, force) and the form's Idempotency-Key, so a form sent twice runs once
//	POST /jobs/{id}/pause     pause; with until (RFC 3339), for (1h or 1d) or until_local (a
//	                          datetime-local value, which the script turns into until in the browser's
//	                          zone) a pause that ends by itself; also resume and delete
//	POST /bulk                pause, resume, run or delete every job matching a filter, once confirmed
//	POST /pause-all           the service-wide pause (until, reason), once confirmed; POST /resume-all
//	                          ends it. While it holds, every page shows a banner with its reason and end
//	GET  /login               the sign-in form; POST signs in, POST /logout out
//	GET  /assets/...          the style sheet and the script, embedded in the binary
//
// A jobs page reads at most Config.PageSize jobs past its cursor, so it
// stays fast with a million jobs (a filter that few jobs pass reads
// further; the search tests each id and name in place, with
// [cron.JobQuery.Text], before any other filter). The overview's counts
// and charts and the jobs list's totals read every job (a page at a
// time) or the runs of the last day: they are shared by every request
// and computed again in the background once older than
// Config.OverviewMaxAge, so that a page is answered from the last ones
// and never waits for a scan (but the very first), and at most every ten
// times a scan took, so that the scans of a million jobs take at most a
// tenth of a core. The jobs list's total is the runner's count
// ([cron.Runner.Count]); the jobs a filter keeps are counted with a scan
// while the service holds at most 100,000 jobs, and sorted while they
// are at most 100,000 (a sort of more says so, and the list stays in
// creation order). The confirmation of a
// bulk action counts the jobs it would act on the same way (beyond
// 100,000 jobs, the jobs a filter keeps are counted as they are acted
// on, and the outcome says how many).
//
// # Charts
//
// The charts are inline SVG drawn by the server: no script, nothing
// loaded, so they pass the Content-Security-Policy. Each has a title and
// an aria-label that sum it up, a <title> per bar (its numbers on hover
// and for screen readers) and a table of the same numbers below. They
// are read with bounded reads: the overview's from
// [cron.Runner.QueryRuns], at most 10,000 runs each (a chart capped so
// says it), computed at most once per Config.OverviewMaxAge; a job's
// from its history ([cron.Runner.Runs]), its latest 100 runs.
//
// # Writes go through the runner
//
// Every write is a call of the runner, in process, made for the
// signed-in user ([cron.WithActor]): the runner authorizes it (403
// otherwise) and records it in its audit log, shown on the job's page,
// as for every other caller; the console has no rule of its own. A
// form's inputs are named after the job's JSON fields ("schedule.every")
// and go through the API's decoding, defaults and callback allow-list
// ([httpapi.Server.CreateJob], [httpapi.Server.PatchJob],
// [httpapi.Server.RunNow]), so that an error on a field shows beside its
// input with the API's words ([httpapi.Problem]).
//
// # Security
//
// Pages are html/template, so every job field is text, and jobs and runs
// are shown by the runner's secrets rule for the user's role
// ([cron.Job.RedactedFor]). With authentication on in the API, the
// sign-in form takes an API token, checked by the API with its throttling
// of wrong tokens ([httpapi.Server.Authenticate]); the browser then keeps
// only an opaque session id, in an HttpOnly, SameSite=Strict cookie
// (Secure over TLS) on the console's path. The console keeps the session
// in memory with an expiry (Config.SessionTTL), ends it at sign-out, and
// as soon as its token no longer signs in (removed from the tokens file);
// a restart ends every session. The user's role hides the buttons they
// may not use (a viewer sees none) and the runner refuses what they try
// anyway. Every write carries a CSRF token (an HMAC under Config.Secret
// of a random cookie of the browser) and is refused with 403 without it,
// or when the browser says it comes from another site. A Host the API
// does not answer (see [httpapi.Config.AllowedHosts]) gets 421.
// Config.ReadOnly refuses every write. Every answer sets
// Content-Security-Policy (default-src 'self', frame-ancestors 'none'),
// X-Frame-Options DENY and nosniff; nothing is loaded from elsewhere.
//
// # Times
//
// A time is written as how far it is from now ("5 min ago", "in 3 s"),
// computed by the server, with its absolute form on hover (its title):
// "2026-11-27 22:57:25 UTC", the one absolute form of every page, the
// zone named. The script keeps the relative times current. A job's next
// times are listed in its own zone (and in UTC when that differs), and
// a cron job's zone is shown in the jobs list and on its page. Durations
// are written as the command line writes them ([cron.Duration]'s form:
// "every 5m", "14h", "1.5s").
package console
