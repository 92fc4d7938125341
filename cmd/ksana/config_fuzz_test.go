package main

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/ksana-dev/ksana/cron/httpapi"
)

// FuzzLoadConfig: any environment either yields a config within every
// variable's bounds or fails with a *ConfigError naming a variable and the
// value it holds, never a panic.
func FuzzLoadConfig(f *testing.F) {
	for _, s := range [][8]string{
		{},
		{"8080", "127.0.0.1", "4", "10s", "debug", "json", "tok-secret-000001", "*.internal,api.example.com"},
		{"-1", "::1", "0", "0s", "loud", "xml", " tok", "http://x"},
		{"65536", "[::1]", "65537", "-5s", "WARN", "TEXT", "\t", "*,"},
		{"7100", "a b", "1", "1h", "warning", "text", "", "*."},
		{"0", "", "0", "", "", "", "", ""},
		{"", "", "", "1ns", "", "", "", "api.example.com."},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7])
	}
	vars := map[string]bool{}
	for _, v := range envVars {
		vars[v.name] = true
	}
	f.Fuzz(func(t *testing.T, port, listen, workers, timeout, level, format, token, allow string) {
		env := map[string]string{
			"PORT": port, "LISTEN_ADDR": listen, "WORKERS": workers, "DEFAULT_TIMEOUT": timeout,
			"RETRY_BACKOFF": timeout, "LOG_LEVEL": level, "LOG_FORMAT": format,
			"KSANA_API_TOKEN": token, "KSANA_CALLBACK_ALLOW": allow,
		}
		c, err := loadConfig(func(k string) string { return env[k] })
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T) is not a *ConfigError", err, err)
			}
			if !vars[ce.Var] {
				t.Fatalf("error %v names %q, not a variable of -h", err, ce.Var)
			}
			if got, want := ce.Value, env[ce.Var]; strings.TrimSpace(got) != strings.TrimSpace(want) {
				t.Fatalf("error %v holds value %q, the environment %q", err, got, want)
			}
			return
		}
		if c.Port < 0 || c.Port > 65535 {
			t.Errorf("Port = %d", c.Port)
		}
		if c.Workers < 1 {
			t.Errorf("Workers = %d", c.Workers)
		}
		if c.DefaultTimeout <= 0 || c.RetryBackoff <= 0 || c.DrainTimeout <= 0 || c.MinInterval <= 0 {
			t.Errorf("a duration is not positive: %+v", c)
		}
		if c.LogFormat != "text" && c.LogFormat != "json" {
			t.Errorf("LogFormat = %q", c.LogFormat)
		}
		if strings.ContainsAny(c.Listen, "/ ") || (strings.Contains(c.Listen, ":") && net.ParseIP(c.Listen) == nil) {
			t.Errorf("Listen = %q accepted", c.Listen)
		}
		if c.Token != "" && strings.TrimSpace(c.Token) != c.Token {
			t.Errorf("Token %q with white space accepted", c.Token)
		}
		if c.Token != "" && len(c.Token) < httpapi.MinTokenLen {
			t.Errorf("Token %q shorter than %d bytes accepted", c.Token, httpapi.MinTokenLen)
		}
		for _, p := range c.CallbackAllow {
			if p == "" || p != strings.ToLower(p) || strings.Contains(p, ",") {
				t.Errorf("allow-list pattern %q accepted", p)
			}
		}
		if _, err := httpapi.ParseAllowList(strings.Join(c.CallbackAllow, ",")); err != nil {
			t.Errorf("the parsed allow-list %q does not parse again: %v", c.CallbackAllow, err)
		}
	})
}
