package cron

import (
	"errors"
	"fmt"
	"time"
)

// The errors of the package: a caller branches on them with errors.Is.
// Errors that carry data are types: *[ValidationError] (matches
// ErrInvalidJob), *[ParseError] (matches ErrInvalidCron) and
// *[ForbiddenError] (matches ErrForbidden).
var (
	// ErrNotFound is returned for an id that no job has.
	ErrNotFound = errors.New("cron: job not found")

	// ErrExists is returned when a job is added with an id already in use.
	ErrExists = errors.New("cron: job id already exists")

	// ErrConflict is returned (wrapped) by [SharedStore.Write] when the
	// stored job is no longer at the version the write was made from:
	// another runner wrote it first. The runner then reads the job again
	// and applies its change to that; it reaches a caller only when the
	// job keeps changing under it.
	ErrConflict = errors.New("cron: the job changed meanwhile")

	// ErrInvalidJob matches every *ValidationError with errors.Is.
	ErrInvalidJob = errors.New("cron: invalid job")

	// ErrInvalidCron matches every *[ParseError] with errors.Is.
	ErrInvalidCron = errors.New("cron: invalid expression")

	// ErrInFlight is returned by [Runner.RunNow] for a job that has a run
	// queued or running on this runner, or over a shared store that counts
	// them ([RunCounter]) on another runner, unless [RunOptions.Force] is set.
	ErrInFlight = errors.New("cron: a run of the job is already in flight")

	// ErrServicePaused is returned by [Runner.RunNow] while the service is
	// paused (see [Runner.PauseAll]).
	ErrServicePaused = errors.New("cron: the service is paused")

	// ErrClosed is returned by [Runner.RunNow] once [Runner.Run] has returned,
	// and by a second call of Run.
	ErrClosed = errors.New("cron: runner is closed")

	// ErrUnavailable is wrapped by the errors of the reads a runner over a
	// [SharedStore] makes for the API ([Runner.List], [Runner.Count],
	// [Runner.Get] of a job not held, [Runner.Runs]) when the store cannot
	// answer, as while its database is down: a caller may try again.
	ErrUnavailable = errors.New("cron: the store is unavailable")

	// ErrUnsupported is returned (wrapped) by [Runner.Runs] when the store keeps
	// no run history (does not implement [RunStore]). It matches
	// errors.ErrUnsupported too.
	ErrUnsupported = fmt.Errorf("cron: the store keeps no run history: %w", errors.ErrUnsupported)

	// ErrBadCursor is returned (wrapped) for a cursor that no page gave.
	ErrBadCursor = errors.New("cron: bad run cursor")

	// ErrAlertSignature is returned by [VerifyAlert] for an alert whose
	// signature or timestamp does not hold.
	ErrAlertSignature = errors.New("cron: alert signature does not verify")

	// ErrForbidden is matched by the error of a change its actor may not
	// make ([ForbiddenError]).
	ErrForbidden = errors.New("cron: forbidden")

	// Errors of an idempotent run-now ([RunOptions.IdempotencyKey]).

	// ErrIdempotencyKeyReused: the key was used for a run-now of the job
	// with other options.
	ErrIdempotencyKeyReused = errors.New("cron: this idempotency key was used for another run-now of the job with other options")
	// ErrIdempotencyPending: the first run-now with the key has not been
	// answered yet (it is still being answered, here or on another
	// runner of the store); send it again later.
	ErrIdempotencyPending = errors.New("cron: the first run-now with this idempotency key has not been answered yet")
)

// The defaults and the limits: the values a zero field of [Config] (and of
// the other configurations of the package) stands for, the fixed times of
// the runner, and the largest values it accepts.
const (
	// DefaultWorkers is the runs a runner executes at the same time
	// ([Config.Workers]).
	DefaultWorkers = 4

	// DefaultDrainTimeout is how long the runs in flight may go on once
	// Run's context ends ([Config.DrainTimeout]).
	DefaultDrainTimeout = 30 * time.Second

	// DefaultMisfireTolerance is how late a run may start and still be on
	// time ([Config.MisfireTolerance]).
	DefaultMisfireTolerance = time.Second

	// DefaultClaimAhead is the default of [Config.ClaimAhead].
	DefaultClaimAhead = 250 * time.Millisecond

	// DefaultMinInterval is the shortest interval of an every schedule (and of
	// a cron expression's @every) that [Job.Prepare] accepts when
	// [Rules.MinInterval] is 0.
	DefaultMinInterval = time.Second

	// DefaultRunLimit is how many runs per job a [MemStore] keeps when its
	// RunLimit is 0.
	DefaultRunLimit = 50

	// DefaultPauseRefresh is the default of [Config.PauseRefresh].
	DefaultPauseRefresh = time.Second

	// DefaultAlertAfter is the failures in a row that raise a failing_streak
	// alert when [AlertConfig.After] is 0.
	DefaultAlertAfter = 3

	// DefaultAuditKeep is how many audit entries an [AuditBuffer] keeps when
	// its Keep is 0 (and so [MemStore] and store/jsonstore).
	DefaultAuditKeep = 10000

	// DefaultIdempotencyKeys is how many idempotency keys a [MemStore],
	// store/jsonstore or a runner without an [IdempotencyStore] keeps.
	DefaultIdempotencyKeys = 100_000

	// IdempotencyWindow is how long an idempotency key of a run-now holds: an
	// entry reserved this long or longer before a new reservation of its key
	// does not count, and a store deletes such entries now and then.
	IdempotencyWindow = 24 * time.Hour

	// BatchEvery is the least time between the starts of two passes of the
	// recorder of a runner over a [SharedStore].
	BatchEvery = 100 * time.Millisecond

	// DefaultAlertBackoff is the wait before the first retry of an alert
	// delivery (doubled for each next one, up to MaxAlertBackoff) when
	// [Config.AlertBackoff] is 0.
	DefaultAlertBackoff = time.Second
	// MaxAlertBackoff is the longest wait between two attempts at an alert.
	MaxAlertBackoff = 5 * time.Minute
	// DefaultAlertHorizon is how long an alert is retried when
	// [Config.AlertHorizon] is 0; then it is dead.
	DefaultAlertHorizon = 24 * time.Hour
	// MaxDeadAlerts is how many dead alerts an [AlertOutbox] keeps (the
	// youngest).
	MaxDeadAlerts = 1000
	// DefaultAlertMissedEvery is the least time between two missed alerts
	// of one job when [AlertConfig.MissedEvery] is 0.
	DefaultAlertMissedEvery = 5 * time.Minute

	// Default and largest page of [RunQuery].

	DefaultRunQueryLimit = 50
	MaxRunQueryLimit     = 1000

	// The defaults [Job.Prepare] gives when a field is zero and [Rules] has none.

	DefaultTimeout      = 10 * time.Second
	DefaultMaxRetries   = 3
	DefaultRetryBackoff = 5 * time.Second

	// The limits of what the runner accepts.

	// MaxIDLen is the longest job id [Runner.Add] accepts.
	MaxIDLen = 128

	// MaxTypeLen is the longest job type name.
	MaxTypeLen = 64

	// MaxAlertSecretLen is the longest alert secret accepted.
	MaxAlertSecretLen = 256

	// MaxPauseReason is the longest reason, in bytes, that [Runner.PauseAll]
	// accepts.
	MaxPauseReason = 1024

	// MaxPreview is the most run times [ScheduleSpec.Next], [Runner.Next] and
	// [Runner.Preview] list at once.
	MaxPreview = 1000

	// MaxIdempotencyKeyLen is the longest [RunOptions.IdempotencyKey].
	MaxIdempotencyKeyLen = 255
)

// Words of the package that a user sees: job types, alert transitions and
// headers, callback headers, the reasons of a slot not called, schedule
// kinds and run triggers.
const (
	// JobTypeHTTP is the type of a job that makes an HTTP callback, the
	// default. Every other type names a Go function registered on the runner
	// (see [Runner.Handle]).
	JobTypeHTTP = "http"

	// Hidden is what the secrets rule shows in place of a secret.
	Hidden = "(hidden)"

	// ServicePausedError is the Error of the skipped run that stands for a
	// slot passed while the service was paused.
	ServicePausedError = "service paused"

	// The transitions of a job's health that an alert reports, as they appear
	// in the alert's "transition", in [Run].Alert and in a job's last_alert.

	// AlertFailing: the first failed run after a success (or ever).
	AlertFailing = "failing"
	// AlertFailingStreak: the job has failed [AlertConfig.After] times in a
	// row.
	AlertFailingStreak = "failing_streak"
	// AlertRecovered: a run succeeded after failures that were alerted.
	AlertRecovered = "recovered"
	// AlertPaused: the job failed [AlertConfig.PauseAfter] times in a row
	// and the runner paused it.
	AlertPaused = "paused"
	// AlertMissed: slots of the job were recorded missed (not called:
	// the runner was down, no runner held the job, a once job was past
	// due, or its holder died or stopped); the alert's Run is the missed
	// record, with the count of slots ([Run.Slots], 0 meaning 1) and the
	// reason ([Run.Reason]). It leaves the job's health as it was, and is
	// sent at most once per [AlertConfig.MissedEvery] for a job.
	AlertMissed = "missed"
	// AlertRun: a run ended that is no transition, alerted because its
	// job asks for it ([AlertConfig.Notify]: every failure, or every
	// run). It leaves the job's health as it was.
	AlertRun = "run"

	// The headers of an alert request.

	// AlertTimestampHeader holds the Unix time (seconds) at which the
	// alert was signed; it is part of the signed content.
	AlertTimestampHeader = "X-Ksana-Timestamp"
	// AlertSignatureHeader holds "sha256=" and the hex HMAC-SHA256, keyed
	// by the secret, of the timestamp, a '.', and the body (see
	// [SignAlert]). It is left out when the alert has no secret.
	AlertSignatureHeader = "X-Ksana-Signature"
	// AlertDeliveryHeader holds the id of the delivery
	// ([AlertDelivery.ID]): the same on every attempt at one alert, so
	// that a receiver can drop a repeat of an alert it already got.
	AlertDeliveryHeader = "X-Ksana-Delivery"

	// The request headers every callback carries.

	HeaderJobID       = "X-Ksana-Job-Id"
	HeaderRunID       = "X-Ksana-Run-Id"
	HeaderScheduledAt = "X-Ksana-Scheduled-At"
	HeaderTriggeredAt = "X-Ksana-Triggered-At"

	// The reasons a slot was not called, in [Run.Reason] of a skipped or
	// missed run record.

	// ReasonDowntime: the slots passed while the runner was not running
	// (stopped, or held up past the misfire tolerance); they rolled on to
	// the job's next slot.
	ReasonDowntime = "downtime"
	// ReasonOverlap: the job's previous run was still in flight.
	ReasonOverlap = "overlap"
	// ReasonNoHolder: over a shared store, the slots passed while no runner
	// held the job; the runner that took it over rolled them on.
	ReasonNoHolder = "no holder"
	// ReasonPaused: the slots passed while the job was paused (since its
	// [Job.PausedAt]); recorded when it is resumed, by the runner that
	// resumes it: the one that paused it or not, after a restart too, and
	// over a [SharedStore] a runner that does not hold the job (the
	// record is its own, and the holder does not record it again).
	ReasonPaused = "paused"
	// ReasonServicePaused: the slots passed while every firing of the
	// service was paused.
	ReasonServicePaused = "service paused"
	// ReasonHolderDied: the runner that claimed the slot stopped before the
	// run ended; it was not called, or the outcome of its call is unknown.
	ReasonHolderDied = "holder died"
	// ReasonHolderStopped: the runner that claimed the slot was held up so
	// long that calling it would have been later than the misfire rules
	// allow.
	ReasonHolderStopped = "holder stopped"
	// ReasonClaimFailed: the claim of the slot in a shared store failed.
	ReasonClaimFailed = "claim failed"
	// ReasonPastDue: a once job's time had passed when the runner saw it.
	ReasonPastDue = "past due"

	// Schedule kinds.

	KindOnce  = "once"
	KindEvery = "every"
	KindCron  = "cron"

	// The triggers of a run, in [Run.Trigger]. The retries of a run are its
	// attempts ([Run.Attempts]), in the same record.

	TriggerSchedule = "schedule" // a slot of the job's schedule
	TriggerRunNow   = "run-now"  // [Runner.RunNow], POST /jobs/{id}/run-now
)
