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
)

// The defaults: the values a zero field of [Config] (and of the other
// configurations of the package) stands for, and the fixed times of the
// runner.
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
	// a cron expression's @every) that [Prepare] accepts when
	// [Rules.MinInterval] is 0.
	DefaultMinInterval = time.Second

	// DefaultRunLimit is how many runs per job a [MemStore] keeps when its
	// RunLimit is 0.
	DefaultRunLimit = 50

	// DefaultCountLimit is the limit [CountSlots] applies when given max <= 0.
	DefaultCountLimit = 1000

	// DefaultPauseRefresh is the default of [Config.PauseRefresh].
	DefaultPauseRefresh = time.Second

	// DefaultAlertAfter is the failures in a row that raise a failing_streak
	// alert when [AlertConfig.After] is 0.
	DefaultAlertAfter = 3

	// DefaultAuditKeep is how many audit entries an [AuditBuffer] keeps when
	// its Keep is 0 (and so [MemStore] and store/jsonstore).
	DefaultAuditKeep = 10000

	// DefaultIdempotencyKeys is how many keys an [IdempotencyMemory] keeps
	// when its Max is 0.
	DefaultIdempotencyKeys = 100_000

	// IdempotencyWindow is how long an idempotency key of a run-now holds: an
	// entry reserved this long or longer before a new reservation of its key
	// does not count, and a store deletes such entries now and then.
	IdempotencyWindow = 24 * time.Hour

	// BatchEvery is the least time between the starts of two passes of the
	// recorder of a runner over a [SharedStore].
	BatchEvery = 100 * time.Millisecond
)

// The limits of what the runner accepts.
const (
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

// Words of the package that a user sees.
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
)
