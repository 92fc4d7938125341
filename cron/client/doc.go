// Package client is a Go client of the REST management API of a ksana
// timed-job service (package cron/httpapi, served by cmd/ksana).
//
// A [Client] is made from the service's base URL, an *http.Client and the
// API token ("" when the service has none), and has one method per
// endpoint: [Client.List] (with its filters and paging), [Client.Get],
// [Client.Create] and [Client.CreateJSON], [Client.Patch] (a typed
// [JobPatch]) and [Client.PatchJSON] (a JSON merge patch),
// [Client.Delete], [Client.RunNow], [Client.RunNowWith], [Client.Pause], [Client.Resume],
// [Client.Runs], [Client.AllRuns], [Client.Run] (one run by its id),
// [Client.Next], [Client.Preview], [Client.Audit] (the
// audit log of writes, paged) and [Client.Health].
// Jobs and runs are the types of package cron ([cron.Job], [cron.Run]).
//
// # Waiting for a run
//
// A run-now answers at once with the run's id; [Client.Wait] waits for
// its end and returns its record (status, attempts, error), asking for it
// at a growing interval until the service has one. Bound it by its ctx:
//
//	id, err := c.RunNow(ctx, "nightly")
//	...
//	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
//	defer cancel()
//	run, err := c.Wait(ctx, id)
//
// # Errors
//
// An answer other than 2xx is an *[APIError]: the HTTP status, the API's
// message and, when one field is at fault, its JSON name ("schedule.cron",
// "limit"). It matches the sentinels a caller branches on with
// errors.Is: [cron.ErrNotFound] (404), [cron.ErrExists] (409),
// [cron.ErrInvalidJob] (400 on a create, a patch or a preview),
// [cron.ErrUnavailable] (503), [ErrUnauthorized] (401) and [ErrForbidden]
// (403: the token's role is too small; [APIError.Role] names the role
// needed). A request that
// never got an answer (a refused connection, a cancelled context) is the
// error of the *http.Client, wrapped.
//
// A Client is safe for concurrent use.
package client
