package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/httpapi"
	"github.com/ksana-dev/ksana/store/sqlstore"
)

// config is the service's configuration, read from the environment.
type config struct {
	Listen         string   // host (or IP) to listen on; "" for every interface
	AllowedHosts   []string // KSANA_ALLOWED_HOSTS: more Host names answered without a token
	Port           int
	DataDir        string
	Workers        int
	DefaultTimeout time.Duration
	MaxRetries     int
	RetryBackoff   time.Duration
	DrainTimeout   time.Duration
	MinInterval    time.Duration
	LogLevel       slog.Level
	LogFormat      string
	Token          string
	TokensFile     string          // KSANA_API_TOKENS_FILE, reread on SIGHUP
	Tokens         []httpapi.Token // its tokens at start
	CallbackAllow  []string
	// DatabaseURL selects the SQL store (postgres://... or sqlite:PATH);
	// "" keeps the jobs in DataDir's JSON file.
	DatabaseURL string
	Instance    string        // this instance's name on the database; "" is host-pid-random
	RunHistory  int           // runs kept per job (KSANA_RUN_HISTORY)
	LeaseTTL    time.Duration // lease and heartbeat TTL on the database
	// Alert is the default alert webhook (KSANA_ALERT_URL,
	// KSANA_ALERT_SECRET); an empty URL: none.
	Alert cron.AlertConfig
	// AlertHorizon is how long an alert is retried before it is dead
	// (KSANA_ALERT_HORIZON).
	AlertHorizon time.Duration
	// ConsoleOff stops serving the web console (KSANA_CONSOLE=off);
	// ConsoleReadOnly hides its writes (KSANA_CONSOLE_READONLY=true);
	// ConsoleSecret keys its forms' CSRF tokens (KSANA_CONSOLE_SECRET),
	// nil: random per process.
	ConsoleOff      bool
	ConsoleReadOnly bool
	ConsoleSecret   []byte
}

// envVar documents one variable for -h.
type envVar struct {
	name, def, help string
}

var envVars = []envVar{
	{"LISTEN_ADDR", "", "host or IP address the REST API listens on, such as 127.0.0.1 (empty: every interface)"},
	{"PORT", "7100", "TCP port of the REST API (0: any free port, logged at start)"},
	{"KSANA_ALLOWED_HOSTS", "", "without a token, the Host names the API and the console answer besides this machine's own (localhost, its host name, its addresses), comma-separated, such as ksana.internal:7100; a request naming another host gets 421 (it keeps pages of other sites out through DNS rebinding)"},
	{"KSANA_DATA", "", "data directory holding jobs.json and runs.jsonl; wins over DATA_DIR"},
	{"DATA_DIR", "./data", "data directory, when KSANA_DATA is not set"},
	{"WORKERS", "4", "callbacks executed at the same time"},
	{"DEFAULT_TIMEOUT", "10s", "per-attempt timeout of jobs created without timeout"},
	{"MAX_RETRIES", "3", "retries of jobs created without max_retries (0: none)"},
	{"RETRY_BACKOFF", "5s", "wait between attempts of jobs created without retry_backoff"},
	{"KSANA_RUN_HISTORY", "50", "runs kept in each job's history (the newest), in the JSON file or the database, for a job without keep_runs; from 1 to 100000"},
	{"DRAIN_TIMEOUT", "30s", "on SIGINT/SIGTERM, how long runs in flight may finish before they are cancelled"},
	{"MIN_INTERVAL", "1s", "the shortest interval an every job (or a cron @every) may have"},
	{"LOG_LEVEL", "info", "debug, info, warn or error"},
	{"LOG_FORMAT", "text", "text or json (log records go to stderr)"},
	{"KSANA_API_TOKEN", "", "when set, every endpoint but /health requires Authorization: Bearer <token>; at least 16 bytes"},
	{"KSANA_API_TOKENS_FILE", "", "a file of tokens with roles, one a line: \"role token [name]\" (role viewer, operator or admin; tokens of at least 16 bytes; # starts a comment line); reread on SIGHUP: a bad line is refused, the others apply; an empty or unreadable file leaves none valid"},
	{"KSANA_CALLBACK_ALLOW", "", "comma-separated patterns job URLs and alert webhooks must match: host names such as *.internal,api.example.com, IP addresses and CIDR blocks such as 127.0.0.1,10.0.0.0/8; an IP literal passes only where such a pattern names it, and loopback, link-local and unspecified addresses are refused after DNS unless one names them (empty: any host and address, loopback included)"},
	{"DATABASE_URL", "", "postgres://... or sqlite:PATH: keep the jobs in that database, shared by every ksana on it (unset: the JSON file of the data directory)"},
	{"KSANA_INSTANCE", "", "this instance's name among those on one DATABASE_URL; a name a live instance uses is refused at start, exit 2 (unset: host-pid-random)"},
	{"KSANA_ALERT_URL", "", "the webhook told when a job's health changes (failing, failing_streak, recovered, paused), for the jobs whose alert names no url of their own (unset: only those jobs alert)"},
	{"KSANA_ALERT_SECRET", "", "keys the HMAC-SHA256 signature of the alerts to KSANA_ALERT_URL (header X-Ksana-Signature); at most 256 bytes"},
	{"KSANA_ALERT_HORIZON", "24h", "how long an alert the webhook does not take is retried (at most 5m apart, kept in the store across restarts) before it is dead (listed by ksana alerts ls -dead)"},
	{"KSANA_CONSOLE", "on", "off: do not serve the web console at /ui/ (GET / is then the API's 404)"},
	{"KSANA_CONSOLE_READONLY", "false", "true: the web console shows no button that writes and refuses every write"},
	{"KSANA_CONSOLE_SECRET", "", "keys the web console's form tokens, at least 32 bytes; give the same one to every instance behind one address (unset: random per process)"},
	{"GOGC", "50", "the Go collector's target once the jobs are loaded: how far the heap grows between collections, in percent of what is live (Go's own default is 100, which the start uses; off: no collection)"},
	{"KSANA_LEASE_TTL", "6s", "with DATABASE_URL: how long an instance's leases last without renewal (at least 2s); a dead instance's jobs fire again elsewhere within it plus a third"},
}

// ConfigError names the environment variable that is wrong.
type ConfigError struct {
	Var   string
	Value string
	Want  string
	// Secret keeps Value out of the message (a token): it shows only
	// the value's length.
	Secret bool
}

// Error names the variable, its value (or, of a secret, its length) and
// what it must be.
func (e *ConfigError) Error() string {
	if e.Secret {
		return fmt.Sprintf("%s (a secret of %d bytes, not shown): %s", e.Var, len(e.Value), e.Want)
	}
	return fmt.Sprintf("%s=%q: %s", e.Var, e.Value, e.Want)
}

// dataDir is the data directory: $KSANA_DATA, else $DATA_DIR, else ./data.
func dataDir(getenv func(string) string) string {
	if d := getenv("KSANA_DATA"); d != "" {
		return d
	}
	if d := getenv("DATA_DIR"); d != "" {
		return d
	}
	return "./data"
}

// loadConfig reads the environment through getenv.
func loadConfig(getenv func(string) string) (config, error) {
	c := config{DataDir: dataDir(getenv)}
	var err error
	get := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	intVar := func(name, def string, lo, hi int, dst *int) {
		if err != nil {
			return
		}
		v := get(name, def)
		n, perr := strconv.Atoi(v)
		if perr != nil || n < lo || n > hi {
			err = &ConfigError{Var: name, Value: v, Want: fmt.Sprintf("must be an integer from %d to %d", lo, hi)}
			return
		}
		*dst = n
	}
	durVar := func(name, def string, dst *time.Duration) {
		if err != nil {
			return
		}
		v := get(name, def)
		d, perr := time.ParseDuration(v)
		if perr != nil || d <= 0 {
			err = &ConfigError{Var: name, Value: v, Want: "must be a positive duration such as 10s or 1m30s"}
			return
		}
		*dst = d
	}
	intVar("PORT", "7100", 0, 65535, &c.Port)
	for _, h := range strings.Split(getenv("KSANA_ALLOWED_HOSTS"), ",") {
		if h = strings.TrimSpace(h); h != "" {
			c.AllowedHosts = append(c.AllowedHosts, h)
		}
	}
	if v := strings.TrimSpace(getenv("LISTEN_ADDR")); v != "" {
		host := strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
		if strings.ContainsAny(host, "/ ") || (strings.Contains(host, ":") && net.ParseIP(host) == nil) {
			return c, &ConfigError{Var: "LISTEN_ADDR", Value: v, Want: "must be a host name or an IP address, such as 127.0.0.1 or ::1 (the port is PORT)"}
		}
		c.Listen = host
	}
	intVar("WORKERS", "4", 1, 65536, &c.Workers)
	durVar("DEFAULT_TIMEOUT", "10s", &c.DefaultTimeout)
	intVar("MAX_RETRIES", "3", 0, 1000, &c.MaxRetries)
	durVar("RETRY_BACKOFF", "5s", &c.RetryBackoff)
	intVar("KSANA_RUN_HISTORY", "50", 1, 100000, &c.RunHistory)
	durVar("DRAIN_TIMEOUT", "30s", &c.DrainTimeout)
	durVar("MIN_INTERVAL", "1s", &c.MinInterval)
	durVar("KSANA_LEASE_TTL", "6s", &c.LeaseTTL)
	durVar("KSANA_ALERT_HORIZON", "24h", &c.AlertHorizon)
	if err == nil && c.LeaseTTL < sqlstore.MinLeaseTTL {
		err = &ConfigError{Var: "KSANA_LEASE_TTL", Value: getenv("KSANA_LEASE_TTL"), Want: fmt.Sprintf("must be at least %v (shorter leases move partitions when commits slow down)", sqlstore.MinLeaseTTL)}
	}
	if err != nil {
		return c, err
	}
	switch v := strings.ToLower(get("LOG_LEVEL", "info")); v {
	case "debug":
		c.LogLevel = slog.LevelDebug
	case "info":
		c.LogLevel = slog.LevelInfo
	case "warn", "warning":
		c.LogLevel = slog.LevelWarn
	case "error":
		c.LogLevel = slog.LevelError
	default:
		return c, &ConfigError{Var: "LOG_LEVEL", Value: getenv("LOG_LEVEL"), Want: "must be debug, info, warn or error"}
	}
	switch v := strings.ToLower(get("LOG_FORMAT", "text")); v {
	case "text", "json":
		c.LogFormat = v
	default:
		return c, &ConfigError{Var: "LOG_FORMAT", Value: getenv("LOG_FORMAT"), Want: "must be text or json"}
	}
	c.Token = getenv("KSANA_API_TOKEN")
	if c.Token != "" && (strings.TrimSpace(c.Token) == "" || strings.TrimSpace(c.Token) != c.Token) {
		return c, &ConfigError{Var: "KSANA_API_TOKEN", Value: c.Token, Secret: true,
			Want: "must not be blank nor start or end with white space (no client could send it); unset it to turn authentication off"}
	}
	if c.Token != "" && len(c.Token) < httpapi.MinTokenLen {
		return c, &ConfigError{Var: "KSANA_API_TOKEN", Value: c.Token, Secret: true,
			Want: fmt.Sprintf("must be at least %d bytes (openssl rand -hex 16 makes one of 32)", httpapi.MinTokenLen)}
	}
	if p := strings.TrimSpace(getenv("KSANA_API_TOKENS_FILE")); p != "" {
		tokens, terr := readTokens(p)
		if terr != nil {
			return c, &ConfigError{Var: "KSANA_API_TOKENS_FILE", Value: p, Want: "cannot be used: " + terr.Error()}
		}
		c.TokensFile, c.Tokens = p, tokens
	}
	allow, aerr := httpapi.ParseAllowList(getenv("KSANA_CALLBACK_ALLOW"))
	if aerr != nil {
		return c, &ConfigError{Var: "KSANA_CALLBACK_ALLOW", Value: getenv("KSANA_CALLBACK_ALLOW"), Want: aerr.Error()}
	}
	c.CallbackAllow = allow
	c.Alert = cron.AlertConfig{URL: strings.TrimSpace(getenv("KSANA_ALERT_URL")), Secret: getenv("KSANA_ALERT_SECRET")}
	if c.Alert.URL == "" && c.Alert.Secret != "" {
		return c, &ConfigError{Var: "KSANA_ALERT_SECRET", Value: c.Alert.Secret, Secret: true, Want: "is set without KSANA_ALERT_URL"}
	}
	if c.Alert.URL != "" {
		j := cron.Job{Type: "x", Schedule: cron.Every(time.Minute), Alert: &c.Alert}
		var ve *cron.ValidationError
		if err := j.Validate(); errors.As(err, &ve) {
			name, value := "KSANA_ALERT_URL", cron.RedactURL(c.Alert.URL)
			if ve.Field == "alert.secret" {
				name, value = "KSANA_ALERT_SECRET", "(hidden)"
			}
			return c, &ConfigError{Var: name, Value: value, Want: ve.Reason}
		}
		if u, err := url.Parse(c.Alert.URL); err == nil && len(allow) > 0 && !httpapi.HostAllowed(allow, u.Hostname()) {
			return c, &ConfigError{Var: "KSANA_ALERT_URL", Value: cron.RedactURL(c.Alert.URL),
				Want: fmt.Sprintf("host %q is not in KSANA_CALLBACK_ALLOW (%s): add it there, since alerts are held to that list too", u.Hostname(), strings.Join(allow, ","))}
		}
	}
	switch v := strings.ToLower(strings.TrimSpace(get("KSANA_CONSOLE", "on"))); v {
	case "on", "true":
	case "off", "false":
		c.ConsoleOff = true
	default:
		return c, &ConfigError{Var: "KSANA_CONSOLE", Value: getenv("KSANA_CONSOLE"), Want: "must be on or off"}
	}
	switch v := strings.ToLower(strings.TrimSpace(get("KSANA_CONSOLE_READONLY", "false"))); v {
	case "false":
	case "true":
		c.ConsoleReadOnly = true
	default:
		return c, &ConfigError{Var: "KSANA_CONSOLE_READONLY", Value: getenv("KSANA_CONSOLE_READONLY"), Want: "must be true or false"}
	}
	if sec := getenv("KSANA_CONSOLE_SECRET"); sec != "" {
		if len(sec) < 32 {
			return c, &ConfigError{Var: "KSANA_CONSOLE_SECRET", Value: sec, Secret: true, Want: "must hold at least 32 bytes"}
		}
		c.ConsoleSecret = []byte(sec)
	}
	c.DatabaseURL = strings.TrimSpace(getenv("DATABASE_URL"))
	c.Instance = strings.TrimSpace(getenv("KSANA_INSTANCE"))
	if strings.ContainsAny(c.Instance, " \t\n") {
		return c, &ConfigError{Var: "KSANA_INSTANCE", Value: getenv("KSANA_INSTANCE"), Want: "must not contain white space"}
	}
	return c, nil
}

// usage is the text of -h.
func usage() string {
	var b strings.Builder
	b.WriteString(`ksana: the timed-job service. It serves the REST API (POST/GET /jobs,
GET/PATCH/DELETE /jobs/{id}, POST /jobs/{id}/run-now|pause|resume,
GET /jobs/{id}/runs|next, GET /runs, GET /runs/{id},
POST /schedules/preview, GET /audit,
GET /health, GET /metrics, and its OpenAPI 3 document at
GET /openapi.json) and keeps its jobs in one JSON file,
<data dir>/jobs.json, or with DATABASE_URL in PostgreSQL or SQLite,
where several instances share the jobs. SIGINT or SIGTERM stops it
cleanly; SIGHUP rereads KSANA_API_TOKENS_FILE, and never stops it.

Usage: ksana [-h]            start the service
       ksana COMMAND [flags]  call a running service (below)

Exit status: 0 after a clean stop, 2 for a bad configuration (a variable
below, DATABASE_URL included), 1 for any other failure.

Environment:
`)
	width := 0
	for _, v := range envVars {
		width = max(width, len(v.name))
	}
	for _, v := range envVars {
		def := v.def
		if def == "" {
			def = "unset"
		}
		fmt.Fprintf(&b, "  %-*s %s (default %s)\n", width, v.name, v.help, def)
	}
	b.WriteString("\n" + commandsUsage())
	return b.String()
}
