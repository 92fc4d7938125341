package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

// StormConfig configures [Storm].
type StormConfig struct {
	// Prefix is the key prefix. Default (""): [DefaultPrefix].
	Prefix string
	// Windows are the debounce window, the cool-down and the actions per
	// model and second. Zero fields mean the defaults of
	// [scheduler.StormWindows].
	Windows scheduler.StormWindows
	// OpHook observes every Redis operation ("storm_report",
	// "storm_unavailable"). Default (nil): none.
	OpHook OpHook
}

// Storm is the Redis [scheduler.StormGuard]. Its keys carry the hash tag
// {model:<model>} ([Keys.StormWindow], [Keys.StormUnavailable],
// [Keys.StormRate]), so each report is one Lua script over one slot:
//
//   - INCR the node's window counter; if the window was already open, the
//     report is only counted ("debounced");
//   - otherwise INCR the model's per-second action counter (PX 1000 when
//     new); over the limit, the window counter is deleted again and the
//     report is "rate_limited";
//   - otherwise the window gets its PX TTL and the unavailable key is set
//     with the cool-down as PX ("marked").
type Storm struct {
	c    rueidis.Client
	keys Keys
	w    scheduler.StormWindows
	args [3]string
	hook OpHook
}

var _ scheduler.StormGuard = (*Storm)(nil)

// stormReportScript: KEYS window, unavailable, rate; ARGV debounce ms,
// cool-down ms, actions per second. Returns {action, reports}: action 1
// marked, 0 debounced, 2 rate limited.
var stormReportScript = rueidis.NewLuaScript(`
local n = redis.call('INCR', KEYS[1])
if n > 1 then
  if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
  return {0, n}
end
local r = redis.call('INCR', KEYS[3])
if r == 1 then redis.call('PEXPIRE', KEYS[3], 1000) end
if r > tonumber(ARGV[3]) then
  redis.call('DEL', KEYS[1])
  return {2, 1}
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
return {1, 1}`)

// NewStorm returns the storm guard on c.
func NewStorm(c rueidis.Client, cfg StormConfig) (*Storm, error) {
	if c == nil {
		return nil, errors.New("redisstore: NewStorm: nil client")
	}
	w := cfg.Windows
	if w.Debounce < 0 || w.Cooldown < 0 || w.ActionsPerSecond < 0 {
		return nil, fmt.Errorf("redisstore: StormConfig.Windows: %+v has a negative field", w)
	}
	def := scheduler.Config{}.WithDefaults().Storm
	if w.Debounce == 0 {
		w.Debounce = def.Debounce
	}
	if w.Cooldown == 0 {
		w.Cooldown = def.Cooldown
	}
	if w.ActionsPerSecond == 0 {
		w.ActionsPerSecond = def.ActionsPerSecond
	}
	return &Storm{
		c: c, keys: NewKeys(cfg.Prefix), w: w, hook: cfg.OpHook,
		args: [3]string{strconv.FormatInt(pxMS(w.Debounce), 10), strconv.FormatInt(pxMS(w.Cooldown), 10), strconv.Itoa(w.ActionsPerSecond)},
	}, nil
}

func checkModel(model string) error {
	if model == "" || strings.ContainsAny(model, "{}") {
		return fmt.Errorf("redisstore: storm: model %q must be non-empty and free of braces", model)
	}
	return nil
}

// Report implements [scheduler.StormGuard].
func (s *Storm) Report(ctx context.Context, nodeID, model string) (scheduler.StormDecision, error) {
	if err := checkModel(model); err != nil {
		return scheduler.StormDecision{}, err
	}
	start := time.Now()
	vals, err := stormReportScript.Exec(ctx, s.c,
		[]string{s.keys.StormWindow(model, nodeID), s.keys.StormUnavailable(model, nodeID), s.keys.StormRate(model)},
		s.args[:]).AsIntSlice()
	if err == nil && len(vals) != 2 {
		err = fmt.Errorf("unexpected reply %v", vals)
	}
	s.hook.observe("storm_report", start, err)
	if err != nil {
		return scheduler.StormDecision{}, fmt.Errorf("redisstore: storm report %s/%s: %w", nodeID, model, err)
	}
	d := scheduler.StormDecision{Reports: vals[1]}
	switch vals[0] {
	case 1:
		d.Action = scheduler.StormMarked
	case 2:
		d.Action = scheduler.StormRateLimited
	default:
		d.Action = scheduler.StormDebounced
	}
	return d, nil
}

// Unavailable implements [scheduler.StormGuard].
func (s *Storm) Unavailable(ctx context.Context, nodeID, model string) (bool, error) {
	if err := checkModel(model); err != nil {
		return false, err
	}
	start := time.Now()
	n, err := s.c.Do(ctx, s.c.B().Exists().Key(s.keys.StormUnavailable(model, nodeID)).Build()).AsInt64()
	s.hook.observe("storm_unavailable", start, err)
	if err != nil {
		return false, fmt.Errorf("redisstore: storm unavailable %s/%s: %w", nodeID, model, err)
	}
	return n == 1, nil
}
