package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/redisstore"
)

// Defaults of the binary's own keys of the [dispatcher] table.
const (
	defaultListen         = "127.0.0.1:7200"
	defaultMaxFrameBytes  = 2 << 20 // a 1 MiB payload is 1.4 MB in base64
	defaultSendQueue      = 1024
	defaultWriteTimeoutMS = 10000
	defaultDrainTimeoutMS = 10000
	defaultWorkers        = 64
	defaultPingIntervalMS = 15000
	defaultReadHeaderMS   = 10000
	defaultIdleTimeoutMS  = 60000
	defaultMaxPending     = 256
	minTokenBytes         = 16
)

// envMetricsToken, when set, is dispatcher.metrics_token: the secret need
// not be written in the file.
const envMetricsToken = "KSANA_DISPATCHER_METRICS_TOKEN"

// envConsoleReadToken and envConsoleAdminToken, when set, are
// dispatcher.console_read_token and dispatcher.console_admin_token.
const (
	envConsoleReadToken  = "KSANA_DISPATCHER_CONSOLE_READ_TOKEN"
	envConsoleAdminToken = "KSANA_DISPATCHER_CONSOLE_ADMIN_TOKEN"
)

// ServerConfig is the binary's own part of the [dispatcher] table.
type ServerConfig struct {
	Listen         string `toml:"listen"`
	NodeToken      string `toml:"node_token"`
	SessionToken   string `toml:"session_token"`
	MaxFrameBytes  int64  `toml:"max_frame_bytes"`
	SendQueue      int    `toml:"send_queue"`
	WriteTimeoutMS int    `toml:"write_timeout_ms"`
	DrainTimeoutMS int    `toml:"drain_timeout_ms"`
	Workers        int    `toml:"workers"`
	PingIntervalMS int    `toml:"ping_interval_ms"`
	// ReadHeaderTimeoutMS bounds the reading of a request's headers.
	ReadHeaderTimeoutMS int `toml:"read_header_timeout_ms"`
	// IdleTimeoutMS closes a keep-alive HTTP connection idle this long.
	IdleTimeoutMS int `toml:"idle_timeout_ms"`
	// MaxPendingConns caps the connections not yet authenticated (every
	// connection until it is a WebSocket that passed its token check).
	MaxPendingConns int `toml:"max_pending_conns"`
	// MetricsToken, when set, is the bearer token /metrics requires.
	MetricsToken string `toml:"metrics_token"`
	// ConsoleReadToken, when set, signs in a read-only user of the
	// console at /ui/; ConsoleAdminToken one who may also requeue and
	// delete dead letters. With neither, the console is open, read-only.
	ConsoleReadToken  string `toml:"console_read_token"`
	ConsoleAdminToken string `toml:"console_admin_token"`
	LogLevel          string `toml:"log_level"`
	LogFormat         string `toml:"log_format"`
	// NodeCredentials bind tokens to the node ids they may register.
	NodeCredentials []NodeCredential `toml:"node_credentials"`
}

// NodeCredential is one [[dispatcher.node_credentials]] entry: a node
// that presents Token may register as any of NodeIDs, and only as those.
type NodeCredential struct {
	Token   string   `toml:"token"`
	NodeIDs []string `toml:"node_ids"`
}

// redisConfig is where the plane's shared state lives when
// scheduler.phase2.enabled is true.
type redisConfig struct {
	Mode   string // "single" or "cluster", for the start-up log
	Client redisstore.ClientConfig
	Stores redisstore.StoresConfig
}

// config is the whole configuration of one dispatcher process.
type config struct {
	Plane  scheduler.Config
	Redis  *redisConfig // nil: one instance in memory
	Server ServerConfig
}

// fileConfig is the shape of config.toml.
type fileConfig struct {
	Scheduler struct {
		Phase2 phase2Table `toml:"phase2"`
	} `toml:"scheduler"`
	Dispatcher struct {
		dispatchTable
		ServerConfig
	} `toml:"dispatcher"`
}

// phase2Table is [scheduler.phase2] with its sub-tables.
type phase2Table struct {
	Enabled    bool   `toml:"enabled"`
	InstanceID string `toml:"instance_id"`
	Redis      struct {
		Mode        string   `toml:"mode"`
		URL         string   `toml:"url"`
		ClusterURLs []string `toml:"cluster_urls"`
		KeyPrefix   string   `toml:"key_prefix"`
	} `toml:"redis"`
	OwnerTTLSeconds      int64  `toml:"owner_ttl_seconds"`
	StreamGroup          string `toml:"stream_group"`
	StreamBlockMS        int64  `toml:"stream_block_ms"`
	StreamCount          int    `toml:"stream_count"`
	StreamMaxLen         int64  `toml:"stream_maxlen"`
	StreamClaimMinIdleMS int64  `toml:"stream_claim_min_idle_ms"`
	DLQEnabled           *bool  `toml:"dlq_enabled"`
	DLQMaxLen            int64  `toml:"dlq_maxlen"`
	DLQMaxDeliveries     int64  `toml:"dlq_max_deliveries"`
	DLQMinIdleMS         int64  `toml:"dlq_min_idle_ms"`
	DLQScanIntervalMS    int64  `toml:"dlq_scan_interval_ms"`
	DLQScanCount         int    `toml:"dlq_scan_count"`
	NodeSnapshot         struct {
		Enabled                 *bool `toml:"enabled"`
		PresenceTTLSeconds      int64 `toml:"presence_ttl_seconds"`
		RefreshIntervalMS       int64 `toml:"refresh_interval_ms"`
		RemoveStaleAfterSeconds int64 `toml:"remove_stale_after_seconds"`
	} `toml:"node_snapshot"`
	Storm struct {
		DebounceWindowMS    int64 `toml:"debounce_window_ms"`
		CooldownMS          int64 `toml:"cooldown_ms"`
		MaxActionsPerSecond int   `toml:"max_actions_per_second"`
	} `toml:"storm"`
}

// dispatchTable is the plane's part of the [dispatcher] table.
type dispatchTable struct {
	AckTimeoutMS     int64  `toml:"ack_timeout_ms"`
	RunTimeoutMS     int64  `toml:"run_timeout_ms"`
	LeaseMS          int64  `toml:"lease_ms"`
	QueueTimeoutMS   int64  `toml:"queue_timeout_ms"`
	QueueLimit       int    `toml:"queue_limit"`
	RetryIntervalMS  int64  `toml:"retry_interval_ms"`
	SweepIntervalMS  int64  `toml:"sweep_interval_ms"`
	MaxAttempts      int    `toml:"max_attempts"`
	DefaultCapacity  int    `toml:"default_capacity"`
	Selection        string `toml:"selection"`
	TurnTTLSeconds   int64  `toml:"turn_ttl_seconds"`
	JobTTLSeconds    int64  `toml:"job_ttl_seconds"`
	RequestTimeoutMS int64  `toml:"request_timeout_ms"`
}

// setting documents one key for -h; field is the scheduler.Config field
// it sets, so that the library's errors can name the key.
type setting struct{ key, field, def, doc string }

var settings = []setting{
	{"scheduler.phase2.enabled", "", "false", "true: share the plane with other instances over Redis; false: one instance in memory"},
	{"scheduler.phase2.instance_id", "InstanceID", "auto", "this instance's id (presence, owner bindings, inbox); auto = host name + random hex"},
	{"scheduler.phase2.owner_ttl_seconds", "OwnerTTL", "45", "TTL of the instance presence and of node and session owner bindings"},
	{"scheduler.phase2.stream_group", "", "scheduler", "consumer group of the inboxes"},
	{"scheduler.phase2.stream_block_ms", "Inbox.Block", "1000", "BLOCK of each inbox read"},
	{"scheduler.phase2.stream_count", "Inbox.Count", "64", "COUNT of each inbox read"},
	{"scheduler.phase2.stream_maxlen", "", "10000", "bound of an inbox; a message to a full inbox is refused, never trimmed"},
	{"scheduler.phase2.stream_claim_min_idle_ms", "Inbox.ClaimMinIdle", "30000", "idle time before another consumer takes over a pending entry"},
	{"scheduler.phase2.dlq_enabled", "", "true", "move entries that keep failing to the dead-letter stream"},
	{"scheduler.phase2.dlq_maxlen", "", "10000", "approximate bound of the dead-letter stream"},
	{"scheduler.phase2.dlq_max_deliveries", "Inbox.MaxDeliveries", "10", "deliveries after which an entry is dead"},
	{"scheduler.phase2.dlq_min_idle_ms", "Inbox.DeadMinIdle", "60000", "idle time before a dead entry is moved"},
	{"scheduler.phase2.dlq_scan_interval_ms", "Inbox.ScanInterval", "5000", "period of the dead-letter scan and the inbox_pending gauge"},
	{"scheduler.phase2.dlq_scan_count", "Inbox.ScanCount", "100", "page size of the dead-letter scan"},
	{"scheduler.phase2.redis.mode", "", "single", "single (redis.url) or cluster (redis.cluster_urls)"},
	{"scheduler.phase2.redis.url", "", "", "redis:// or rediss:// URL; required in single mode when enabled"},
	{"scheduler.phase2.redis.cluster_urls", "", "[]", "seed URLs of the cluster; required in cluster mode when enabled"},
	{"scheduler.phase2.redis.key_prefix", "", "ksana", "first part of every key; one per environment"},
	{"scheduler.phase2.node_snapshot.enabled", "", "true", "share the fleet view (nodes of every instance)"},
	{"scheduler.phase2.node_snapshot.presence_ttl_seconds", "Fleet.PresenceTTL", "45", "a node is online while its instance refreshes it within this TTL"},
	{"scheduler.phase2.node_snapshot.refresh_interval_ms", "Fleet.RefreshInterval", "2000", "how often an instance publishes its nodes and reads the fleet"},
	{"scheduler.phase2.node_snapshot.remove_stale_after_seconds", "Fleet.RemoveStaleAfter", "600", "a node not seen for this long is removed from the fleet"},
	{"scheduler.phase2.storm.debounce_window_ms", "Storm.Debounce", "5000", "model_not_available reports after the first are only counted for this long"},
	{"scheduler.phase2.storm.cooldown_ms", "Storm.Cooldown", "30000", "how long a reported model stays unavailable on its node"},
	{"scheduler.phase2.storm.max_actions_per_second", "Storm.ActionsPerSecond", "20", "nodes per second that may have one model marked unavailable"},
	{"dispatcher.listen", "", defaultListen, "address of the HTTP server (/ws/node, /ws/session, /metrics, /health, /ui/); port 0 picks a free one"},
	{"dispatcher.node_token", "", "", "when set, /ws/node requires Authorization: Bearer <node_token> (a token for any node id)"},
	{"dispatcher.node_credentials", "", "[]", "[[dispatcher.node_credentials]] tables of token and node_ids: a node presenting token may register only as one of node_ids (see below)"},
	{"dispatcher.session_token", "", "", "when set, /ws/session requires Authorization: Bearer <session_token>"},
	{"dispatcher.max_frame_bytes", "", fmt.Sprint(defaultMaxFrameBytes), "larger messages get an error frame and are dropped; beyond 8x the connection is closed"},
	{"dispatcher.send_queue", "", fmt.Sprint(defaultSendQueue), "messages queued per connection; a peer that lets it fill is disconnected"},
	{"dispatcher.write_timeout_ms", "", fmt.Sprint(defaultWriteTimeoutMS), "a write to a peer that takes longer closes the connection: a WebSocket message, or a whole HTTP response"},
	{"dispatcher.read_header_timeout_ms", "", fmt.Sprint(defaultReadHeaderMS), "a request whose headers take longer to arrive is dropped with its connection"},
	{"dispatcher.idle_timeout_ms", "", fmt.Sprint(defaultIdleTimeoutMS), "a keep-alive HTTP connection idle this long is closed (WebSockets are kept alive by pings)"},
	{"dispatcher.max_pending_conns", "", fmt.Sprint(defaultMaxPending), "connections not yet authenticated (every one until it is a WebSocket past its token check); more are closed at once"},
	{"dispatcher.metrics_token", "", "", "when set (or " + envMetricsToken + "), /metrics requires Authorization: Bearer <metrics_token>; at least 16 bytes"},
	{"dispatcher.console_read_token", "", "", "when set (or " + envConsoleReadToken + "), the console at /ui/ needs a sign-in; this token sees every page; at least 16 bytes"},
	{"dispatcher.console_admin_token", "", "", "when set (or " + envConsoleAdminToken + "), the console at /ui/ needs a sign-in; this token may also requeue and delete dead letters; at least 16 bytes"},
	{"dispatcher.drain_timeout_ms", "", fmt.Sprint(defaultDrainTimeoutMS), "on SIGTERM, how long queued messages may take to reach their peers"},
	{"dispatcher.workers", "", fmt.Sprint(defaultWorkers), "messages of one connection handled at once (one job's or one turn's messages keep their order; a goroutine runs only while there are messages to handle)"},
	{"dispatcher.ping_interval_ms", "", fmt.Sprint(defaultPingIntervalMS), "the dispatcher pings every peer this often; a peer that does not answer within it is disconnected"},
	{"dispatcher.log_level", "", "info", "debug, info, warn or error"},
	{"dispatcher.log_format", "", "text", "text or json (logs go to stderr)"},
	{"dispatcher.ack_timeout_ms", "Dispatch.AckTimeout", "10000", "a node that does not job_ack in time loses the job to another node"},
	{"dispatcher.run_timeout_ms", "Dispatch.RunTimeout", "300000", "bound of one attempt from dispatch to result (overshoot at most sweep_interval_ms plus one sweep)"},
	{"dispatcher.lease_ms", "Dispatch.Lease", "15000", "lease of an acknowledged job, renewed every third; a dead instance's jobs are rescued after it"},
	{"dispatcher.queue_timeout_ms", "Dispatch.QueueTimeout", "10000", "how long a job may wait for an eligible node before it fails with no_node"},
	{"dispatcher.queue_limit", "Dispatch.QueueLimit", "1000", "jobs of one pool that may wait on this instance for a node; a new job beyond it gets job_failed queue_full at once (at most 1000000)"},
	{"dispatcher.retry_interval_ms", "Dispatch.RetryInterval", "200", "how often waiting jobs look for a node again when no freed slot or new node woke them"},
	{"dispatcher.sweep_interval_ms", "Dispatch.SweepInterval", "500", "how often overdue jobs are looked for"},
	{"dispatcher.max_attempts", "Dispatch.MaxAttempts", "3", "nodes a job is tried on before it fails"},
	{"dispatcher.default_capacity", "Dispatch.DefaultCapacity", "4", "jobs at once on a node that registers without a capacity"},
	{"dispatcher.selection", "Dispatch.Selection", scheduler.SelectRandom, "random or two_choices (the less loaded of two random nodes)"},
	{"dispatcher.turn_ttl_seconds", "Dispatch.TurnTTL", "86400", "garbage-collection TTL of a turn's affinity (far longer than any turn)"},
	{"dispatcher.job_ttl_seconds", "Dispatch.JobTTL", "86400", "how long a job's records (and its answer, for late duplicates) are kept"},
	{"dispatcher.request_timeout_ms", "Dispatch.RequestTimeout", "computed", "a request unanswered this long gets job_failed; default queue + attempts x (ack + run) + lease"},
}

// ConfigError reports a bad key of config.toml; Key is its full TOML name,
// such as "dispatcher.selection" or "scheduler.phase_2" for an unknown
// table.
type ConfigError struct {
	Key    string
	Reason string
}

func (e *ConfigError) Error() string { return e.Key + ": " + e.Reason }

func configErr(key, format string, args ...any) error {
	return &ConfigError{Key: key, Reason: fmt.Sprintf(format, args...)}
}

// loadConfig reads the config file at path ("" for none: every default)
// and applies the -listen override and the environment (getenv):
// KSANA_DISPATCHER_METRICS_TOKEN, KSANA_DISPATCHER_CONSOLE_READ_TOKEN and
// KSANA_DISPATCHER_CONSOLE_ADMIN_TOKEN, each winning over the file. Errors
// name the file or the variable.
func loadConfig(path, listen string, getenv func(string) string) (config, error) {
	var data []byte
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return config{}, err
		}
		data = b
	}
	cfg, err := parseConfig(data)
	if err != nil {
		if path != "" {
			err = fmt.Errorf("%s: %w", path, err)
		}
		return config{}, err
	}
	if listen != "" {
		cfg.Server.Listen = listen
		if err := cfg.Server.validate(); err != nil {
			return config{}, err
		}
	}
	if tok := getenv(envMetricsToken); tok != "" {
		if len(tok) < minTokenBytes {
			return config{}, fmt.Errorf("%s: must be at least %d bytes", envMetricsToken, minTokenBytes)
		}
		cfg.Server.MetricsToken = tok
	}
	for _, e := range []struct {
		name string
		dst  *string
	}{{envConsoleReadToken, &cfg.Server.ConsoleReadToken}, {envConsoleAdminToken, &cfg.Server.ConsoleAdminToken}} {
		if tok := getenv(e.name); tok != "" {
			if len(tok) < minTokenBytes {
				return config{}, fmt.Errorf("%s: must be at least %d bytes", e.name, minTokenBytes)
			}
			*e.dst = tok
		}
	}
	if t := cfg.Server.ConsoleReadToken; t != "" && t == cfg.Server.ConsoleAdminToken {
		return config{}, configErr("dispatcher.console_admin_token", "must differ from console_read_token")
	}
	if cfg.Plane.InstanceID == "" || cfg.Plane.InstanceID == "auto" {
		cfg.Plane.InstanceID = newInstanceID()
	}
	return cfg, nil
}

// newInstanceID returns a generated instance id: the host name and 8 random
// hex digits, such as "web-1-3fa2c09b".
func newInstanceID() string {
	host, err := os.Hostname()
	if err != nil || host == "" || strings.ContainsAny(host, "{} \t\r\n") {
		host = "dispatcher"
	}
	var b [4]byte
	rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

// parseConfig decodes a config.toml. A table or key the file format does
// not know, a value of the wrong type and an invalid value are each a
// *ConfigError naming the key; the instance id stays "auto" or "" when so
// configured (loadConfig resolves it).
func parseConfig(data []byte) (config, error) {
	var f fileConfig
	md, err := toml.Decode(string(data), &f)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return config{}, fmt.Errorf("line %d: %s", pe.Position.Line, pe.Message)
		}
		return config{}, err // a type mismatch: toml names the key and line
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		sort.Strings(keys) // a table sorts before its keys
		return config{}, configErr(keys[0], "unknown %s", kindOf(md, und, keys[0]))
	}
	p := f.Scheduler.Phase2
	ms, sec := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }, func(v int64) time.Duration { return time.Duration(v) * time.Second }
	d := f.Dispatcher.dispatchTable
	plane := scheduler.Config{
		InstanceID: p.InstanceID,
		OwnerTTL:   sec(p.OwnerTTLSeconds),
		Inbox: scheduler.InboxConfig{
			Block: ms(p.StreamBlockMS), Count: p.StreamCount, ClaimMinIdle: ms(p.StreamClaimMinIdleMS),
			NoDeadLetters: p.DLQEnabled != nil && !*p.DLQEnabled, MaxDeliveries: p.DLQMaxDeliveries,
			DeadMinIdle: ms(p.DLQMinIdleMS), ScanInterval: ms(p.DLQScanIntervalMS), ScanCount: p.DLQScanCount,
		},
		Fleet: scheduler.FleetConfig{
			Off:         p.NodeSnapshot.Enabled != nil && !*p.NodeSnapshot.Enabled,
			PresenceTTL: sec(p.NodeSnapshot.PresenceTTLSeconds), RefreshInterval: ms(p.NodeSnapshot.RefreshIntervalMS),
			RemoveStaleAfter: sec(p.NodeSnapshot.RemoveStaleAfterSeconds),
		},
		Storm: scheduler.StormWindows{Debounce: ms(p.Storm.DebounceWindowMS), Cooldown: ms(p.Storm.CooldownMS), ActionsPerSecond: p.Storm.MaxActionsPerSecond},
		Dispatch: scheduler.DispatchConfig{
			AckTimeout: ms(d.AckTimeoutMS), RunTimeout: ms(d.RunTimeoutMS), Lease: ms(d.LeaseMS),
			QueueTimeout: ms(d.QueueTimeoutMS), QueueLimit: d.QueueLimit, RetryInterval: ms(d.RetryIntervalMS), SweepInterval: ms(d.SweepIntervalMS),
			MaxAttempts: d.MaxAttempts, DefaultCapacity: d.DefaultCapacity, Selection: d.Selection,
			TurnTTL: sec(d.TurnTTLSeconds), JobTTL: sec(d.JobTTLSeconds), RequestTimeout: ms(d.RequestTimeoutMS),
		},
	}
	if p.InstanceID == "auto" {
		plane.InstanceID = ""
	}
	if err := plane.Validate(); err != nil {
		return config{}, tomlError(err)
	}
	plane = plane.WithDefaults()
	plane.InstanceID = p.InstanceID
	cfg := config{Plane: plane}

	r := p.Redis
	if r.Mode != "" && r.Mode != "single" && r.Mode != "cluster" {
		return config{}, configErr("scheduler.phase2.redis.mode", "unknown mode %q (single|cluster)", r.Mode)
	}
	if strings.ContainsAny(r.KeyPrefix, "{} \t\r\n") {
		return config{}, configErr("scheduler.phase2.redis.key_prefix", "%q may not contain braces or white space", r.KeyPrefix)
	}
	if strings.ContainsAny(p.StreamGroup, " \t\r\n") {
		return config{}, configErr("scheduler.phase2.stream_group", "%q may not contain white space", p.StreamGroup)
	}
	for _, k := range []struct {
		key string
		v   int64
	}{{"scheduler.phase2.stream_maxlen", p.StreamMaxLen}, {"scheduler.phase2.dlq_maxlen", p.DLQMaxLen}} {
		if k.v < 0 {
			return config{}, configErr(k.key, "must not be negative")
		}
	}
	if p.Enabled {
		rc := &redisConfig{Mode: "single", Stores: redisstore.StoresConfig{
			KeyPrefix: r.KeyPrefix, Group: p.StreamGroup, InboxMaxLen: p.StreamMaxLen, DLQMaxLen: p.DLQMaxLen,
		}}
		key := "scheduler.phase2.redis.url"
		if r.Mode == "cluster" {
			rc.Mode, key = "cluster", "scheduler.phase2.redis.cluster_urls"
			if len(r.ClusterURLs) == 0 {
				return config{}, configErr(key, "required in cluster mode")
			}
			rc.Client.ClusterURLs = r.ClusterURLs
		} else {
			if r.URL == "" {
				return config{}, configErr(key, "required in single mode")
			}
			rc.Client.URL = r.URL
		}
		if _, err := redisstore.ClientOption(rc.Client); err != nil {
			_, reason, _ := strings.Cut(strings.TrimPrefix(err.Error(), "redisstore: "), ": ")
			return config{}, configErr(key, "%s", reason)
		}
		cfg.Redis = rc
	}
	cfg.Server = f.Dispatcher.ServerConfig.withDefaults()
	if err := cfg.Server.validate(); err != nil {
		return config{}, err
	}
	return cfg, nil
}

// kindOf says whether an undecoded key is a table or a key.
func kindOf(md toml.MetaData, und []toml.Key, key string) string {
	for _, k := range und {
		if k.String() == key && md.Type(k...) == "Hash" {
			return "table"
		}
	}
	if i := strings.LastIndexByte(key, '.'); i < 0 {
		return "top-level key"
	}
	return "key"
}

// tomlError renames the scheduler.Config field of a *scheduler.ConfigError
// to its key of config.toml.
func tomlError(err error) error {
	var ce *scheduler.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	for _, s := range settings {
		if s.field == ce.Field {
			return configErr(s.key, "%s", ce.Reason)
		}
	}
	return err
}

func (s ServerConfig) withDefaults() ServerConfig {
	if s.Listen == "" {
		s.Listen = defaultListen
	}
	if s.MaxFrameBytes == 0 {
		s.MaxFrameBytes = defaultMaxFrameBytes
	}
	if s.SendQueue == 0 {
		s.SendQueue = defaultSendQueue
	}
	if s.WriteTimeoutMS == 0 {
		s.WriteTimeoutMS = defaultWriteTimeoutMS
	}
	if s.DrainTimeoutMS == 0 {
		s.DrainTimeoutMS = defaultDrainTimeoutMS
	}
	if s.Workers == 0 {
		s.Workers = defaultWorkers
	}
	if s.PingIntervalMS == 0 {
		s.PingIntervalMS = defaultPingIntervalMS
	}
	if s.ReadHeaderTimeoutMS == 0 {
		s.ReadHeaderTimeoutMS = defaultReadHeaderMS
	}
	if s.IdleTimeoutMS == 0 {
		s.IdleTimeoutMS = defaultIdleTimeoutMS
	}
	if s.MaxPendingConns == 0 {
		s.MaxPendingConns = defaultMaxPending
	}
	if s.LogLevel == "" {
		s.LogLevel = "info"
	}
	if s.LogFormat == "" {
		s.LogFormat = "text"
	}
	return s
}

func (s ServerConfig) validate() error {
	if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		return configErr("dispatcher.listen", "%q is not host:port: %v", s.Listen, err)
	}
	if s.MaxFrameBytes < 4096 || s.MaxFrameBytes > 64<<20 {
		return configErr("dispatcher.max_frame_bytes", "%d is outside 4096..%d", s.MaxFrameBytes, 64<<20)
	}
	for _, f := range []struct {
		name   string
		v, max int
	}{
		{"send_queue", s.SendQueue, 1 << 20}, {"write_timeout_ms", s.WriteTimeoutMS, 3600000},
		{"drain_timeout_ms", s.DrainTimeoutMS, 3600000}, {"workers", s.Workers, 1024},
		{"ping_interval_ms", s.PingIntervalMS, 3600000},
		{"read_header_timeout_ms", s.ReadHeaderTimeoutMS, 3600000}, {"idle_timeout_ms", s.IdleTimeoutMS, 3600000},
		{"max_pending_conns", s.MaxPendingConns, 1 << 20},
	} {
		if f.v < 1 || f.v > f.max {
			return configErr("dispatcher."+f.name, "%d is outside 1..%d", f.v, f.max)
		}
	}
	if s.MetricsToken != "" && len(s.MetricsToken) < minTokenBytes {
		return configErr("dispatcher.metrics_token", "must be at least %d bytes", minTokenBytes)
	}
	for _, t := range []struct{ key, v string }{{"console_read_token", s.ConsoleReadToken}, {"console_admin_token", s.ConsoleAdminToken}} {
		if t.v != "" && len(t.v) < minTokenBytes {
			return configErr("dispatcher."+t.key, "must be at least %d bytes", minTokenBytes)
		}
	}
	if s.ConsoleReadToken != "" && s.ConsoleReadToken == s.ConsoleAdminToken {
		return configErr("dispatcher.console_admin_token", "must differ from console_read_token")
	}
	if _, err := parseLevel(s.LogLevel); err != nil {
		return configErr("dispatcher.log_level", "%v", err)
	}
	if s.LogFormat != "text" && s.LogFormat != "json" {
		return configErr("dispatcher.log_format", "%q (text|json)", s.LogFormat)
	}
	seen := map[string]bool{}
	for i, c := range s.NodeCredentials {
		key := fmt.Sprintf("dispatcher.node_credentials[%d]", i)
		if len(c.Token) < minTokenBytes {
			return configErr(key+".token", "must be at least %d bytes", minTokenBytes)
		}
		if c.Token == s.NodeToken || seen[c.Token] {
			return configErr(key+".token", "is used twice")
		}
		seen[c.Token] = true
		if len(c.NodeIDs) == 0 {
			return configErr(key+".node_ids", "must name at least one node id")
		}
		for j, id := range c.NodeIDs {
			if err := scheduler.CheckID("node_id", id); err != nil || slices.Contains(c.NodeIDs[:j], id) {
				return configErr(fmt.Sprintf("%s.node_ids[%d]", key, j), "%q is not a valid, distinct node id", id)
			}
		}
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, errors.New("unknown level " + fmt.Sprintf("%q", s) + " (debug|info|warn|error)")
	}
	return l, nil
}
