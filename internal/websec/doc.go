// Package websec holds the browser-facing safety of ksana's web consoles:
// sign-in sessions kept in memory behind an opaque cookie, CSRF tokens
// (an HMAC of a random per-browser cookie) with the refusal of writes
// from another origin, the console cookies' attributes, and the strict
// security headers of every answer. It is internal: the consoles
// (scheduler/console) share it, and no user imports it.
//
// # Sessions
//
// [Sessions] maps a random id (the cookie) to a value (a role, a token)
// with an expiry; at most [MaxSessions] are kept, the oldest going first.
// A restart ends every session.
//
// # CSRF
//
// [CSRF.Token] returns the token of a browser's forms and sets its
// random cookie when missing; [CSRF.Check] refuses a write that lacks the
// token, carries a wrong one, or that the browser says comes from another
// origin ([http.CrossOriginProtection]).
//
// # Headers
//
// [SetHeaders] sets a Content-Security-Policy that loads nothing from
// elsewhere and runs no inline script, X-Frame-Options DENY, nosniff and
// a same-origin referrer policy.
package websec
