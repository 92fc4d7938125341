package main

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/internal/nodeunit/proc"
)

// The variables of the claim loop's settings.
const (
	envClaimPolicy       = "NODE_UNIT_CLAIM_POLICY"
	envCPUWeight         = "NODE_UNIT_CPU_WEIGHT"
	envMemoryWeight      = "NODE_UNIT_MEMORY_WEIGHT"
	envSchedulerInterval = "NODE_UNIT_SCHEDULER_INTERVAL_MS"
)

// policyFromEnv reads NODE_UNIT_CLAIM_POLICY and, for resource_usage,
// NODE_UNIT_CPU_WEIGHT and NODE_UNIT_MEMORY_WEIGHT; the error is an
// *EnvError naming the variable.
func policyFromEnv(getenv func(string) string) (claim.Policy, error) {
	w, err := parseWeights(getenv(envCPUWeight), getenv(envMemoryWeight))
	if err != nil {
		return nil, err
	}
	name := getenv(envClaimPolicy)
	p, err := claim.ParsePolicy(name, w)
	var ce *claim.ConfigError
	if errors.As(err, &ce) {
		return nil, envErr(envClaimPolicy, name, "%s", strings.TrimPrefix(ce.Err.Error(), "claim: "))
	}
	return p, err
}

// parseWeights parses NODE_UNIT_CPU_WEIGHT and NODE_UNIT_MEMORY_WEIGHT; an
// empty string keeps the default 0.5. A weight must be a finite number >= 0.
func parseWeights(cpu, memory string) (claim.Weights, error) {
	w := claim.DefaultWeights
	var err error
	if w.CPU, err = parseWeight(envCPUWeight, cpu, w.CPU); err != nil {
		return claim.Weights{}, err
	}
	if w.Memory, err = parseWeight(envMemoryWeight, memory, w.Memory); err != nil {
		return claim.Weights{}, err
	}
	return w, nil
}

func parseWeight(name, s string, def float64) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, envErr(name, s, "not a number")
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, envErr(name, s, "must be a finite number >= 0")
	}
	return f, nil
}

// parseInterval parses NODE_UNIT_SCHEDULER_INTERVAL_MS, a whole number of
// milliseconds from 1 to 86400000; "" is [claim.DefaultInterval].
func parseInterval(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return claim.DefaultInterval, nil
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, envErr(envSchedulerInterval, s, "not a whole number of milliseconds")
	}
	if ms <= 0 || ms > int64(24*time.Hour/time.Millisecond) {
		return 0, envErr(envSchedulerInterval, s, "must be between 1 and 86400000 milliseconds")
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// envVar documents one environment variable; the help text and the
// package documentation list them from here.
type envVar struct {
	Name    string
	Default string
	Help    string
}

// envVars are every variable the binary reads, in help order.
var envVars = []envVar{
	{"DATABASE_URL", "sqlite:$NODE_UNIT_DATA/nodeunit.db", "database holding the deployment and node_unit tables: postgres://... (PostgreSQL) or sqlite:PATH, file:PATH or a PATH (SQLite)"},
	{"NODE_UNIT_DATA", "./data", "data directory: the default SQLite database, the address files and the deployments' log files"},
	{"NODE_UNIT_ADDRESS", "generated", "this node-unit's address; by default one is generated once and kept in $NODE_UNIT_DATA/nodeunit-address, and a second node-unit sharing the directory takes nodeunit-address.2 (a file lock tells which are in use)"},
	{"NODE_UNIT_LISTEN", "127.0.0.1:0", "listen address of GET /NodeUnit/InspectResourceUsage, GET /NodeUnit/Status and GET /metrics (port 0: any free port)"},
	{"NODE_UNIT_USAGE_URL", "from NODE_UNIT_LISTEN", "URL other node-units use to read this one's usage; by default http://HOST:PORT/NodeUnit/InspectResourceUsage of the listener, an unspecified host replaced by the host name"},
	{envClaimPolicy, claim.PolicyDeploymentCount, "claim policy, case-insensitive: deployment_count, resource_usage or none"},
	{envSchedulerInterval, "5000", "claim loop period in milliseconds"},
	{envCPUWeight, "0.5", "weight of cpu_percent in the resource_usage score"},
	{envMemoryWeight, "0.5", "weight of memory_mb/1024 in the resource_usage score"},
	{"NODE_UNIT_MEMBERSHIP_TTL_MS", "3 x interval", "a node-unit whose last heartbeat is older than this is lost and its deployments are taken over; must exceed the interval"},
	{"NODE_UNIT_LOST_AFTER_MS", "0", "how long a node-unit must be missing before its deployments are taken over"},
	{"NODE_UNIT_MAX_CLAIMS_PER_CYCLE", "1", "most deployments claimed per cycle (above 1: up to the node's fair share in one statement)"},
	{"NODE_UNIT_REBALANCE", "false", "move deployments from a node-unit holding 2 or more above the least loaded one"},
	{"NODE_UNIT_SELF_FENCE", "false", "stop this node-unit's deployments when it cannot renew its membership for half the TTL"},
	{"NODE_UNIT_PROBE_FAILURE", "zero", "resource_usage: a node-unit whose usage cannot be read scores 0 (zero) or does not claim that cycle (not_eligible)"},
	{"NODE_UNIT_TRUSTED_COMMAND_REGEXP", "unset: refuse every command", "only commands matching this expression as a whole run (e.g. '/opt/apps/.*' or 'sleep'); a deployment whose command is refused is never claimed, and is shown as refused by nodeunit status"},
	{"NODE_UNIT_STOP_GRACE_MS", "10000", "time between SIGTERM and SIGKILL when stopping a deployment"},
	{"LOG_LEVEL", "info", "debug, info, warn or error"},
	{"LOG_FORMAT", "text", "text or json (structured logs on standard error)"},
}

// EnvError reports a bad environment variable.
type EnvError struct {
	Name  string // the variable
	Value string // its value
	Err   error  // what is wrong
}

// Error names the variable and its value.
func (e *EnvError) Error() string { return fmt.Sprintf("%s=%q: %v", e.Name, e.Value, e.Err) }

// Unwrap returns the reason.
func (e *EnvError) Unwrap() error { return e.Err }

// baseConfig is what every sub-command reads.
type baseConfig struct {
	DataDir     string
	DatabaseURL string
	DefaultDB   bool // DatabaseURL is the default one, in DataDir
	LogLevel    slog.Level
	LogJSON     bool
	MemberTTL   time.Duration // 0: 3 x interval
	Interval    time.Duration
}

// runConfig is what "nodeunit run" reads.
type runConfig struct {
	baseConfig
	Address      string // "" means generated
	Listen       string
	UsageURL     string // "" means from the listener
	Policy       claim.Policy
	LostAfter    time.Duration
	MaxClaims    int
	Rebalance    bool
	SelfFence    bool
	ProbeFailure claim.ProbeFailure
	Trusted      *regexp.Regexp // nil: refuse everything
	StopGrace    time.Duration
}

func envErr(name, value, format string, args ...any) error {
	return &EnvError{Name: name, Value: value, Err: fmt.Errorf(format, args...)}
}

// loadBase reads the variables every sub-command needs.
func loadBase(getenv func(string) string) (baseConfig, error) {
	var c baseConfig
	c.DataDir = strings.TrimSpace(getenv("NODE_UNIT_DATA"))
	if c.DataDir == "" {
		c.DataDir = "data"
	}
	c.DatabaseURL = strings.TrimSpace(getenv("DATABASE_URL"))
	if c.DatabaseURL == "" {
		c.DatabaseURL = "sqlite:" + filepath.Join(c.DataDir, "nodeunit.db")
		c.DefaultDB = true
	}
	switch v := getenv("LOG_LEVEL"); strings.ToLower(strings.TrimSpace(v)) {
	case "", "info":
		c.LogLevel = slog.LevelInfo
	case "debug":
		c.LogLevel = slog.LevelDebug
	case "warn", "warning":
		c.LogLevel = slog.LevelWarn
	case "error":
		c.LogLevel = slog.LevelError
	default:
		return c, envErr("LOG_LEVEL", v, "want debug, info, warn or error")
	}
	switch v := getenv("LOG_FORMAT"); strings.ToLower(strings.TrimSpace(v)) {
	case "", "text":
	case "json":
		c.LogJSON = true
	default:
		return c, envErr("LOG_FORMAT", v, "want text or json")
	}
	var err error
	if c.Interval, err = parseInterval(getenv(envSchedulerInterval)); err != nil {
		return c, err
	}
	if v := getenv("NODE_UNIT_MEMBERSHIP_TTL_MS"); strings.TrimSpace(v) != "" {
		if c.MemberTTL, err = parseMillis("NODE_UNIT_MEMBERSHIP_TTL_MS", v, false); err != nil {
			return c, err
		}
		if c.MemberTTL <= c.Interval {
			return c, envErr("NODE_UNIT_MEMBERSHIP_TTL_MS", v, "must exceed %s (%d ms)", envSchedulerInterval, c.Interval.Milliseconds())
		}
	}
	return c, nil
}

// ttl is the membership TTL in effect.
func (c baseConfig) ttl() time.Duration {
	if c.MemberTTL > 0 {
		return c.MemberTTL
	}
	return 3 * c.Interval
}

// loadRun reads every variable of "nodeunit run"; the error names the
// first bad variable.
func loadRun(getenv func(string) string) (runConfig, error) {
	var c runConfig
	var err error
	if c.baseConfig, err = loadBase(getenv); err != nil {
		return c, err
	}
	if v := getenv("NODE_UNIT_ADDRESS"); v != "" {
		if err := validAddress(v); err != nil {
			return c, &EnvError{Name: "NODE_UNIT_ADDRESS", Value: v, Err: err}
		}
		c.Address = v
	}
	c.Listen = strings.TrimSpace(getenv("NODE_UNIT_LISTEN"))
	if c.Listen == "" {
		c.Listen = "127.0.0.1:0"
	}
	if _, port, err := net.SplitHostPort(c.Listen); err != nil {
		return c, envErr("NODE_UNIT_LISTEN", c.Listen, "want HOST:PORT: %v", err)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return c, envErr("NODE_UNIT_LISTEN", c.Listen, "port %q is not a number between 0 and 65535", port)
	}
	if v := strings.TrimSpace(getenv("NODE_UNIT_USAGE_URL")); v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c, envErr("NODE_UNIT_USAGE_URL", v, "want an http:// or https:// URL with a host")
		}
		c.UsageURL = v
	}
	if c.Policy, err = policyFromEnv(getenv); err != nil {
		return c, err
	}
	if v := getenv("NODE_UNIT_LOST_AFTER_MS"); strings.TrimSpace(v) != "" {
		if c.LostAfter, err = parseMillis("NODE_UNIT_LOST_AFTER_MS", v, true); err != nil {
			return c, err
		}
	}
	c.MaxClaims = 1
	if v := strings.TrimSpace(getenv("NODE_UNIT_MAX_CLAIMS_PER_CYCLE")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100000 {
			return c, envErr("NODE_UNIT_MAX_CLAIMS_PER_CYCLE", v, "want a whole number between 1 and 100000")
		}
		c.MaxClaims = n
	}
	if c.Rebalance, err = parseBool("NODE_UNIT_REBALANCE", getenv("NODE_UNIT_REBALANCE")); err != nil {
		return c, err
	}
	if c.SelfFence, err = parseBool("NODE_UNIT_SELF_FENCE", getenv("NODE_UNIT_SELF_FENCE")); err != nil {
		return c, err
	}
	if c.SelfFence && c.ttl() <= 2*c.Interval {
		return c, envErr("NODE_UNIT_SELF_FENCE", getenv("NODE_UNIT_SELF_FENCE"),
			"needs NODE_UNIT_MEMBERSHIP_TTL_MS (%d ms) above twice %s (%d ms)", c.ttl().Milliseconds(), envSchedulerInterval, c.Interval.Milliseconds())
	}
	switch v := getenv("NODE_UNIT_PROBE_FAILURE"); strings.ToLower(strings.TrimSpace(v)) {
	case "", "zero":
		c.ProbeFailure = claim.ProbeFailureZero
	case "not_eligible":
		c.ProbeFailure = claim.ProbeFailureNotEligible
	default:
		return c, envErr("NODE_UNIT_PROBE_FAILURE", v, "want zero or not_eligible")
	}
	if v := getenv("NODE_UNIT_TRUSTED_COMMAND_REGEXP"); v != "" {
		re, err := regexp.Compile(v)
		if err != nil {
			return c, &EnvError{Name: "NODE_UNIT_TRUSTED_COMMAND_REGEXP", Value: v, Err: err}
		}
		c.Trusted = re
	}
	c.StopGrace = proc.DefaultStopGrace
	if v := getenv("NODE_UNIT_STOP_GRACE_MS"); strings.TrimSpace(v) != "" {
		if c.StopGrace, err = parseMillis("NODE_UNIT_STOP_GRACE_MS", v, false); err != nil {
			return c, err
		}
	}
	return c, nil
}

// parseMillis parses a whole number of milliseconds, at most a day; zero
// is allowed only when zeroOK.
func parseMillis(name, v string, zeroOK bool) (time.Duration, error) {
	ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, envErr(name, v, "not a whole number of milliseconds")
	}
	low := int64(1)
	if zeroOK {
		low = 0
	}
	if ms < low || ms > int64(24*time.Hour/time.Millisecond) {
		return 0, envErr(name, v, "must be between %d and 86400000 milliseconds", low)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func parseBool(name, v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "0", "false", "no", "off":
		return false, nil
	case "1", "true", "yes", "on":
		return true, nil
	}
	return false, envErr(name, v, "want true or false")
}

// validAddress accepts 1 to 200 printable characters without spaces.
func validAddress(a string) error {
	if a == "" || len(a) > 200 {
		return errors.New("want 1 to 200 characters")
	}
	for _, r := range a {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("character %q is not allowed (no spaces or control characters)", r)
		}
	}
	return nil
}
