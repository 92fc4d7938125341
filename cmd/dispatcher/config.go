package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"strings"

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
	LogLevel       string `toml:"log_level"`
	LogFormat      string `toml:"log_format"`
}

// config is the whole configuration of one dispatcher process.
type config struct {
	Plane  scheduler.Config // [scheduler.phase2] with Dispatch from [dispatcher]
	Server ServerConfig
}

// setting documents one key for -h.
type setting struct{ key, def, doc string }

var settings = []setting{
	{"scheduler.phase2.enabled", "false", "true: share the plane with other instances over Redis; false: one instance in memory"},
	{"scheduler.phase2.instance_id", "auto", "this instance's id (presence, owner bindings, inbox); auto = host name + random hex"},
	{"scheduler.phase2.owner_ttl_seconds", "45", "TTL of the instance presence and of node and session owner bindings"},
	{"scheduler.phase2.stream_group", "scheduler", "consumer group of the inboxes"},
	{"scheduler.phase2.stream_block_ms", "1000", "BLOCK of each inbox read"},
	{"scheduler.phase2.stream_count", "64", "COUNT of each inbox read"},
	{"scheduler.phase2.stream_maxlen", "10000", "bound of an inbox; a message to a full inbox is refused, never trimmed"},
	{"scheduler.phase2.stream_claim_min_idle_ms", "30000", "idle time before another consumer takes over a pending entry"},
	{"scheduler.phase2.dlq_enabled", "true", "move entries that keep failing to the dead-letter stream"},
	{"scheduler.phase2.dlq_maxlen", "10000", "approximate bound of the dead-letter stream"},
	{"scheduler.phase2.dlq_max_deliveries", "10", "deliveries after which an entry is dead"},
	{"scheduler.phase2.dlq_min_idle_ms", "60000", "idle time before a dead entry is moved"},
	{"scheduler.phase2.dlq_scan_interval_ms", "5000", "period of the dead-letter scan and the inbox_pending gauge"},
	{"scheduler.phase2.dlq_scan_count", "100", "page size of the dead-letter scan"},
	{"scheduler.phase2.redis.mode", "single", "single (redis.url) or cluster (redis.cluster_urls)"},
	{"scheduler.phase2.redis.url", "", "redis:// or rediss:// URL; required in single mode when enabled"},
	{"scheduler.phase2.redis.cluster_urls", "[]", "seed URLs of the cluster; required in cluster mode when enabled"},
	{"scheduler.phase2.redis.key_prefix", "ksana", "first part of every key; one per environment"},
	{"scheduler.phase2.node_snapshot.enabled", "true", "share the fleet view (nodes of every instance)"},
	{"scheduler.phase2.node_snapshot.presence_ttl_seconds", "45", "a node is online while its instance refreshes it within this TTL"},
	{"scheduler.phase2.node_snapshot.refresh_interval_ms", "2000", "how often an instance publishes its nodes and reads the fleet"},
	{"scheduler.phase2.node_snapshot.remove_stale_after_seconds", "600", "a node not seen for this long is removed from the fleet"},
	{"scheduler.phase2.storm.debounce_window_ms", "5000", "model_not_available reports after the first are only counted for this long"},
	{"scheduler.phase2.storm.cooldown_ms", "30000", "how long a reported model stays unavailable on its node"},
	{"scheduler.phase2.storm.max_actions_per_second", "20", "nodes per second that may have one model marked unavailable"},
	{"dispatcher.listen", defaultListen, "address of the HTTP server (/ws/node, /ws/session, /metrics, /health); port 0 picks a free one"},
	{"dispatcher.node_token", "", "when set, /ws/node requires Authorization: Bearer <node_token>"},
	{"dispatcher.session_token", "", "when set, /ws/session requires Authorization: Bearer <session_token>"},
	{"dispatcher.max_frame_bytes", fmt.Sprint(defaultMaxFrameBytes), "larger messages get an error frame and are dropped; beyond 8x the connection is closed"},
	{"dispatcher.send_queue", fmt.Sprint(defaultSendQueue), "messages queued per connection; a peer that lets it fill is disconnected"},
	{"dispatcher.write_timeout_ms", fmt.Sprint(defaultWriteTimeoutMS), "a write to a peer that takes longer closes the connection"},
	{"dispatcher.drain_timeout_ms", fmt.Sprint(defaultDrainTimeoutMS), "on SIGTERM, how long queued messages may take to reach their peers"},
	{"dispatcher.workers", fmt.Sprint(defaultWorkers), "messages of one connection handled at once (one job's or one turn's messages keep their order)"},
	{"dispatcher.ping_interval_ms", fmt.Sprint(defaultPingIntervalMS), "the dispatcher pings every peer this often; a peer that does not answer within it is disconnected"},
	{"dispatcher.log_level", "info", "debug, info, warn or error"},
	{"dispatcher.log_format", "text", "text or json (logs go to stderr)"},
	{"dispatcher.ack_timeout_ms", fmt.Sprint(scheduler.DefaultAckTimeoutMS), "a node that does not job_ack in time loses the job to another node"},
	{"dispatcher.run_timeout_ms", fmt.Sprint(scheduler.DefaultRunTimeoutMS), "bound of one attempt from dispatch to result"},
	{"dispatcher.lease_ms", fmt.Sprint(scheduler.DefaultLeaseMS), "lease of an acknowledged job, renewed every third; a dead instance's jobs are rescued after it"},
	{"dispatcher.queue_timeout_ms", fmt.Sprint(scheduler.DefaultQueueTimeoutMS), "how long a job may wait for an eligible node before it fails with no_node"},
	{"dispatcher.retry_interval_ms", fmt.Sprint(scheduler.DefaultRetryIntervalMS), "how often a waiting job looks for a node again"},
	{"dispatcher.sweep_interval_ms", fmt.Sprint(scheduler.DefaultSweepIntervalMS), "how often overdue jobs are looked for"},
	{"dispatcher.max_attempts", "3", "nodes a job is tried on before it fails"},
	{"dispatcher.default_capacity", fmt.Sprint(scheduler.DefaultCapacity), "jobs at once on a node that registers without a capacity"},
	{"dispatcher.selection", scheduler.SelectRandom, "random or two_choices (the less loaded of two random nodes)"},
	{"dispatcher.turn_ttl_seconds", fmt.Sprint(scheduler.DefaultTurnTTLSeconds), "garbage-collection TTL of a turn's affinity (far longer than any turn)"},
	{"dispatcher.job_ttl_seconds", fmt.Sprint(scheduler.DefaultJobTTLSeconds), "how long a job's records (and its answer, for late duplicates) are kept"},
	{"dispatcher.request_timeout_ms", "computed", "a request unanswered this long gets job_failed; default queue + attempts x (ack + run) + lease"},
}

// configErr reports a bad key of the [dispatcher] table.
func configErr(field, format string, args ...any) error {
	return &scheduler.ConfigError{Field: scheduler.ConfigPathDispatch + "." + field, Reason: fmt.Sprintf(format, args...)}
}

// loadConfig reads the config file at path ("" for none: every default)
// and applies the -listen override.
func loadConfig(path, listen string) (config, error) {
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
		return config{}, err
	}
	if listen != "" {
		cfg.Server.Listen = listen
		if err := cfg.Server.validate(); err != nil {
			return config{}, err
		}
	}
	return cfg, nil
}

// parseConfig decodes a config.toml: the [scheduler.phase2] tables through
// redisstore.ParseConfig and the [dispatcher] table here. A key under
// [dispatcher] that is not one of the settings is an error, as is a bad
// value; each error names the field.
func parseConfig(data []byte) (config, error) {
	plane, err := redisstore.ParseConfig(data)
	if err != nil {
		return config{}, err
	}
	var doc struct {
		Dispatcher struct {
			scheduler.DispatchConfig
			ServerConfig
		} `toml:"dispatcher"`
	}
	md, err := toml.Decode(string(data), &doc)
	if err != nil {
		return config{}, fmt.Errorf("config.toml: %v: %w", err, scheduler.ErrInvalidConfig)
	}
	var unknown []string
	for _, k := range md.Undecoded() {
		if s := k.String(); s == scheduler.ConfigPathDispatch || strings.HasPrefix(s, scheduler.ConfigPathDispatch+".") {
			unknown = append(unknown, s)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return config{}, &scheduler.ConfigError{Field: unknown[0], Reason: "unknown field"}
	}
	if err := doc.Dispatcher.DispatchConfig.Validate(); err != nil {
		return config{}, err
	}
	plane.Dispatch = doc.Dispatcher.DispatchConfig.WithDefaults()
	if err := plane.Validate(); err != nil {
		return config{}, err
	}
	srv := doc.Dispatcher.ServerConfig.withDefaults()
	if err := srv.validate(); err != nil {
		return config{}, err
	}
	return config{Plane: plane, Server: srv}, nil
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
		return configErr("listen", "%q is not host:port: %v", s.Listen, err)
	}
	if s.MaxFrameBytes < 4096 || s.MaxFrameBytes > 64<<20 {
		return configErr("max_frame_bytes", "%d is outside 4096..%d", s.MaxFrameBytes, 64<<20)
	}
	for _, f := range []struct {
		name   string
		v, max int
	}{
		{"send_queue", s.SendQueue, 1 << 20}, {"write_timeout_ms", s.WriteTimeoutMS, 3600000},
		{"drain_timeout_ms", s.DrainTimeoutMS, 3600000}, {"workers", s.Workers, 1024},
		{"ping_interval_ms", s.PingIntervalMS, 3600000},
	} {
		if f.v < 1 || f.v > f.max {
			return configErr(f.name, "%d is outside 1..%d", f.v, f.max)
		}
	}
	if _, err := parseLevel(s.LogLevel); err != nil {
		return configErr("log_level", "%v", err)
	}
	if s.LogFormat != "text" && s.LogFormat != "json" {
		return configErr("log_format", "%q (text|json)", s.LogFormat)
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
