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
//	GET  /                    overview: jobs by state and kind, failing jobs, the next runs, the instance,
//	                          and for an admin the service-wide pause (until, reason) or its resume
//	GET  /jobs                the jobs, a page at a time (?after=<id>), with a search (?q= part of the
//	                          id or the name, any case) and filters (status, kind, type, enabled,
//	                          paused_until=true: the jobs paused until a time)
//	GET  /jobs/{id}           one job: its schedule in words and as written, its next 10 times in its
//	                          zone and in UTC, the end of its pause, its alert settings, failures in a
//	                          row and last alert, its history (status, attempts, HTTP status, latency,
//	                          lag, error, the reason and slots of a skipped or missed record, the
//	                          alert a run sent) and the audit of its changes
//	GET  /jobs/{id}/history   the history part of the job's page alone (the page reloads it)
//	GET  /runs                the runs of every job, newest first, with the API's filters (job, status,
//	                          since, until, instance) and a page at a time (?after=<cursor>)
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
// [cron.Runner.PageMatching], before any other filter). The overview reads every job, a page at a time, and keeps the
// counts for Config.OverviewMaxAge.
//
// # Writes go through the API
//
// Every write is a request to the REST API ([httpapi.Server], given as
// Config.API) made as the signed-in user: the console has no rule of its
// own. A form's inputs are named after the job's JSON fields
// ("schedule.every"), so the API's error on a field shows beside its
// input; its roles decide who may write (403 otherwise) and its audit log
// records each change, shown on the job's page. The API's refusals (a
// 409 for a run in flight, a 422 for a reused Idempotency-Key, a 400
// naming a field) show in the page.
//
// # Security
//
// Pages are html/template, so every job field is text. With
// authentication on in the API, the sign-in form takes an API token and
// keeps it in an HttpOnly, SameSite=Strict cookie (Secure over TLS) on
// the console's path; the user's role hides the buttons they may not use
// (a viewer sees none) and the API refuses what they try anyway. Every
// write carries a CSRF token (an HMAC under Config.Secret of a random
// cookie of the browser) and is refused with 403 without it, or when the
// browser says it comes from another site. Config.ReadOnly refuses every
// write. Every answer sets Content-Security-Policy (default-src 'self',
// frame-ancestors 'none'), X-Frame-Options DENY and nosniff; nothing is
// loaded from elsewhere.
//
// # Times
//
// The server writes times in UTC inside <time datetime> elements; the
// script shows them in the browser's zone, with UTC on hover. A job's
// next times are listed in its own zone and in UTC.
package console
