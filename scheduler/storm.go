package scheduler

import (
	"context"
	"time"
)

// StormAction is what [StormGuard.Report] decided for one report.
type StormAction string

// The decisions of [StormGuard.Report].
const (
	// StormMarked: the first report of the debounce window; the model is
	// now unavailable on the node for the cool-down.
	StormMarked StormAction = "marked"
	// StormDebounced: a later report within the window; only counted.
	StormDebounced StormAction = "debounced"
	// StormRateLimited: the first report of a window, but the model's
	// actions of the current second are used up; nothing was marked and
	// no window opened, so a later report may act.
	StormRateLimited StormAction = "rate_limited"
)

// StormDecision is the result of one MODEL_NOT_AVAILABLE report.
type StormDecision struct {
	Action StormAction
	// Reports counts the reports of this node and model in the current
	// debounce window, this one included.
	Reports int64
}

// StormWindows are the windows of a [StormGuard]. A zero field means the
// default named on it.
type StormWindows struct {
	// Debounce: after the first MODEL_NOT_AVAILABLE report of a node and
	// model, later reports within this window are only counted. Default 5s.
	Debounce time.Duration
	// Cooldown is how long an acted-on model stays unavailable on that
	// node. Default 30s.
	Cooldown time.Duration
	// ActionsPerSecond bounds how many nodes per second may have one model
	// marked unavailable. Default 20.
	ActionsPerSecond int
}

// StormGuard protects the plane against storms of MODEL_NOT_AVAILABLE
// reports, with its state shared by every instance.
//
// Per node and model, the first report opens a debounce window and marks
// the model unavailable on that node for the cool-down, which node selection
// checks with Unavailable; the reports that follow within the window are
// only counted. Independently, at most ActionsPerSecond nodes per model and
// second are marked (a fixed one-second window opened by the first action),
// so that a fleet-wide storm for one model does not empty the pool at once.
// Each Report is one atomic decision.
type StormGuard interface {
	// Report records one MODEL_NOT_AVAILABLE report of model on nodeID.
	Report(ctx context.Context, nodeID, model string) (StormDecision, error)
	// Unavailable reports whether model is marked unavailable on nodeID.
	Unavailable(ctx context.Context, nodeID, model string) (bool, error)
}
