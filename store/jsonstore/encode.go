package jsonstore

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/ksana-dev/ksana/cron"
)

// appendJob appends the JSON form of j to b. It writes the same fields, in
// the same order and with the same values as cron.Job's MarshalJSON (map
// keys sorted, times RFC3339 UTC, an unset time as ""), without reflection:
// a rewrite of 100,000 jobs spends its time on the disk, not here.
func appendJob(b []byte, j *cron.Job) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, j.ID)
	b = append(b, `,"name":`...)
	b = appendString(b, j.Name)
	b = append(b, `,"enabled":`...)
	b = strconv.AppendBool(b, !j.Paused)
	if !j.PausedUntil.IsZero() {
		b = append(b, `,"paused_until":`...)
		b = appendTime(b, j.PausedUntil)
	}
	if !j.PausedAt.IsZero() {
		b = append(b, `,"paused_at":`...)
		b = appendTime(b, j.PausedAt)
	}
	b = append(b, `,"type":`...)
	b = appendString(b, j.Type)
	if j.WritesHTTP() {
		b = appendHTTP(b, &j.HTTP)
	}
	if len(j.Args) > 0 {
		b = appendArgs(b, j.Args)
	}
	b = append(b, `,"schedule":{"kind":`...)
	s := &j.Schedule
	b = appendString(b, s.Kind)
	if !s.RunAt.IsZero() {
		b = append(b, `,"run_at":`...)
		b = appendTime(b, s.RunAt)
	}
	if s.Every != 0 {
		b = append(b, `,"every":`...)
		b = appendDuration(b, s.Every)
	}
	if s.Kind == cron.KindEvery {
		b = append(b, `,"start_at":`...)
		b = appendTime(b, s.StartAt)
	}
	if s.Jitter != 0 {
		b = append(b, `,"jitter":`...)
		b = appendDuration(b, s.Jitter)
	}
	if s.Cron != "" {
		b = append(b, `,"cron":`...)
		b = appendString(b, s.Cron)
	}
	if s.TZ != "" {
		b = append(b, `,"tz":`...)
		b = appendString(b, s.TZ)
	}
	b = append(b, `},"timeout":`...)
	b = appendDuration(b, j.Timeout)
	b = append(b, `,"max_retries":`...)
	b = strconv.AppendInt(b, int64(j.MaxRetries), 10)
	b = append(b, `,"retry_backoff":`...)
	b = appendDuration(b, j.RetryBackoff)
	if j.MisfireGrace != 0 {
		b = append(b, `,"misfire_grace":`...)
		b = appendDuration(b, j.MisfireGrace)
	}
	if a := j.Alert; a != nil {
		b = appendAlert(b, a)
	}
	if j.KeepRuns != 0 {
		b = append(b, `,"keep_runs":`...)
		b = strconv.AppendInt(b, int64(j.KeepRuns), 10)
	}
	b = append(b, `,"last_run_at":`...)
	b = appendTime(b, j.LastRunAt)
	b = append(b, `,"next_run_at":`...)
	b = appendTime(b, j.NextRunAt)
	b = append(b, `,"last_status":`...)
	b = appendString(b, string(j.LastStatus))
	b = append(b, `,"last_error":`...)
	b = appendString(b, j.LastError)
	if j.Failures != 0 {
		b = append(b, `,"failures":`...)
		b = strconv.AppendInt(b, int64(j.Failures), 10)
	}
	if j.LastAlert != "" {
		b = append(b, `,"last_alert":`...)
		b = appendString(b, j.LastAlert)
	}
	return append(b, '}')
}

// appendAlert writes the alert object of a job, leaving out its zero
// fields as cron.AlertConfig's JSON form does.
func appendAlert(b []byte, a *cron.AlertConfig) []byte {
	b = append(b, `,"alert":{`...)
	n := len(b)
	sep := func() {
		if len(b) > n {
			b = append(b, ',')
		}
	}
	if a.URL != "" {
		b = append(b, `"url":`...)
		b = appendString(b, a.URL)
	}
	if a.Secret != "" {
		sep()
		b = append(b, `"secret":`...)
		b = appendString(b, a.Secret)
	}
	if a.After != 0 {
		sep()
		b = append(b, `"after":`...)
		b = strconv.AppendInt(b, int64(a.After), 10)
	}
	if a.PauseAfter != 0 {
		sep()
		b = append(b, `"pause_after":`...)
		b = strconv.AppendInt(b, int64(a.PauseAfter), 10)
	}
	if a.MissedEvery != 0 {
		sep()
		b = append(b, `"missed_every":`...)
		b = appendDuration(b, a.MissedEvery)
	}
	if a.Notify != "" {
		sep()
		b = append(b, `"notify":`...)
		b = appendString(b, a.Notify)
	}
	return append(b, '}')
}

// appendHTTP writes the http object of a job.
func appendHTTP(b []byte, h *cron.HTTPConfig) []byte {
	b = append(b, `,"http":{"method":`...)
	b = appendString(b, h.Method)
	b = append(b, `,"url":`...)
	b = appendString(b, h.URL)
	if len(h.Headers) > 0 {
		b = append(b, `,"headers":{`...)
		keys := make([]string, 0, len(h.Headers))
		for k := range h.Headers {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendString(b, h.Headers[k])
		}
		b = append(b, '}')
	}
	b = append(b, `,"body":`...)
	b = appendString(b, h.Body)
	return append(b, '}')
}

// appendArgs writes the args of a job, compacted (the runner stores them
// so already; a line of the journal holds no newline). Args that are not
// JSON, which no runner saves, are left out rather than break the file.
func appendArgs(b []byte, args []byte) []byte {
	buf := bytes.NewBuffer(append(b, `,"args":`...))
	if err := json.Compact(buf, args); err != nil {
		return b
	}
	return buf.Bytes()
}

// appendTime writes t as a quoted RFC3339 UTC time, or "" when t is zero.
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, `""`...)
	}
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendDuration writes d as a quoted Go duration string.
func appendDuration(b []byte, d cron.Duration) []byte {
	b = append(b, '"')
	b = append(b, d.String()...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string. Control characters, quotes and
// backslashes are escaped, invalid UTF-8 becomes U+FFFD, and U+2028 and
// U+2029 are escaped so the output is also valid JavaScript, as
// encoding/json does.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
