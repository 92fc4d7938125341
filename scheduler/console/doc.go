// Package console is the operators' web console of a dispatch instance:
// an http.Handler over a [scheduler.Dispatcher] that serves
// server-rendered HTML pages, mountable under any path of any Go
// service. cmd/dispatcher serves it at /ui/.
//
//	c, err := console.New(d, console.Config{ReadToken: rt, AdminToken: at})
//	mux.Handle("/ui/", c)
//
// # Pages
//
// The paths below are relative to where the console is mounted.
//
//	GET  /                overview: the instances (alive or gone), the nodes and sessions attached
//	                      here with the jobs followed on each node, the fleet as this instance sees it,
//	                      the pools with their capacity and use, and the storm guard's decisions
//	GET  /pool?name=P     one pool: the nodes serving it now, the jobs holding their slots, the
//	                      models the storm guard marks unavailable on them
//	GET  /jobs            the jobs in flight, counted by state, a page at a time (?state=RUNNING,
//	                      ?after=<job id>), each with its node, request, session, pool, model, turn
//	                      and the turn's affinity node
//	GET  /inboxes         every instance's inbox: length, pending entries, dead letters
//	GET  /dlq?instance=I  the dead-letter queue of an instance (this one by default); an admin may
//	POST /dlq/requeue     put a dead letter back into its inbox
//	POST /dlq/delete      or delete it
//	GET  /login           the sign-in form; POST signs in, POST /logout out
//	GET  /assets/...      the style sheet and the script, embedded in the binary
//
// The views come from the Dispatcher's read-only methods
// ([scheduler.Dispatcher.Overview], [scheduler.Dispatcher.Pool],
// [scheduler.Dispatcher.Jobs], [scheduler.Dispatcher.Inboxes],
// [scheduler.Dispatcher.DeadLetters]), which copy what the instance holds
// under its lock and read the stores after releasing it; the actions are
// [scheduler.Dispatcher.RequeueDeadLetter] and
// [scheduler.Dispatcher.DeleteDeadLetter], for inbox stores that are a
// [scheduler.DeadLetterAdmin].
//
// # Users
//
// Config.ReadToken signs in a user who sees every page; Config.AdminToken
// one who may also requeue and delete dead letters. With neither set the
// console is open to every visitor, read-only: nobody may act. With one
// set, every page needs a sign-in. The sign-in form takes a token; the
// browser then keeps only an opaque session id, in an HttpOnly,
// SameSite=Strict cookie (Secure over TLS) on the console's path; the
// console keeps the session in memory until Config.SessionTTL, sign-out
// or a restart. A read-only user sees no button that writes, and is
// refused (403) what they try anyway; a visitor not signed in gets 401.
// Wrong tokens are throttled per client address: after 10 failures an
// address may try once a second, and is answered 429 with Retry-After
// until then (whatever token it sends), while other addresses are not
// slowed down. Failures are logged at most once a minute per address.
//
// # Security
//
// Pages are html/template, so every value (ids, a dead letter's fields)
// is text; a dead letter's payload is shown by its size only. Every write
// is a POST of a URL-encoded form (415 otherwise) that carries a CSRF
// token (an HMAC under Config.Secret of a random cookie of the browser)
// and is refused with 403 without it, or when the browser says it comes
// from another origin. Every answer sets a Content-Security-Policy that
// loads nothing from elsewhere and runs no inline script (default-src
// 'self', frame-ancestors 'none', form-action 'self'), X-Frame-Options
// DENY, nosniff and Cache-Control no-store.
package console
