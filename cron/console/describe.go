package console

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// describe puts a schedule in words.
func describe(s cron.ScheduleSpec) string {
	switch s.Kind {
	case cron.KindOnce:
		return "once, at " + s.RunAt.UTC().Format("2006-01-02 15:04:05 UTC")
	case cron.KindEvery:
		w := "every " + words(time.Duration(s.Every))
		if !s.StartAt.IsZero() {
			w += ", counted from " + s.StartAt.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		if s.Jitter > 0 {
			j := words(time.Duration(s.Jitter))
			if j[0] < '0' || j[0] > '9' {
				j = "1 " + j
			}
			w += ", each run up to " + j + " late (jitter)"
		}
		return w
	case cron.KindCron:
		return cronWords(s.Cron) + " (" + zoneName(s) + ")"
	}
	return "unknown schedule kind " + strconv.Quote(s.Kind)
}

// words is a duration in words ("5 minutes", "1h30m0s").
func words(d time.Duration) string {
	units := []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "day"}, {time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}}
	for _, u := range units {
		if d >= u.d && d%u.d == 0 {
			n := int64(d / u.d)
			if n == 1 {
				return u.name
			}
			return fmt.Sprintf("%d %ss", n, u.name)
		}
	}
	return d.String()
}

// cronWords describes the common cron expressions in words, and quotes
// the others.
func cronWords(expr string) string {
	e := strings.TrimSpace(expr)
	if i := strings.IndexByte(e, ' '); i > 0 && (strings.HasPrefix(e, "CRON_TZ=") || strings.HasPrefix(e, "TZ=")) {
		e = strings.TrimSpace(e[i+1:])
	}
	switch e {
	case "@yearly", "@annually":
		return "every year, on January 1st at midnight"
	case "@monthly":
		return "every month, on the 1st at midnight"
	case "@weekly":
		return "every week, on Sunday at midnight"
	case "@daily", "@midnight":
		return "every day at midnight"
	case "@hourly":
		return "every hour, on the hour"
	}
	if d, ok := strings.CutPrefix(e, "@every "); ok {
		if dd, err := time.ParseDuration(strings.TrimSpace(d)); err == nil {
			return "every " + words(dd)
		}
	}
	f := strings.Fields(e)
	sec := "0"
	if len(f) == 6 {
		sec, f = f[0], f[1:]
	}
	if len(f) != 5 {
		return "on the cron expression " + strconv.Quote(expr)
	}
	min, hour, dom, mon, dow := f[0], f[1], f[2], f[3], f[4]
	num := func(s string) bool { _, err := strconv.Atoi(s); return err == nil }
	step := func(s string) (string, bool) { return strings.CutPrefix(s, "*/") }
	days := ""
	switch {
	case dom == "*" && mon == "*" && dow == "*":
		days = "every day"
	case dom == "*" && mon == "*" && (dow == "1-5" || dow == "MON-FRI"):
		days = "Monday to Friday"
	case dom == "*" && mon == "*" && num(dow):
		n, _ := strconv.Atoi(dow)
		days = "every " + time.Weekday(n%7).String()
	case num(dom) && mon == "*" && dow == "*":
		days = "on day " + dom + " of every month"
	default:
		return "on the cron expression " + strconv.Quote(expr)
	}
	secs := ""
	if sec != "0" {
		if n, ok := step(sec); ok {
			return "every " + n + " seconds, " + days
		}
		if !num(sec) {
			return "on the cron expression " + strconv.Quote(expr)
		}
		secs = ":" + twoDigits(sec)
	}
	switch {
	case num(min) && num(hour):
		return days + " at " + twoDigits(hour) + ":" + twoDigits(min) + secs
	case num(min) && hour == "*":
		return "every hour at minute " + min + secs + ", " + days
	case min == "*" && hour == "*" && secs == "":
		return "every minute, " + days
	}
	if n, ok := step(min); ok && hour == "*" && secs == "" {
		return "every " + n + " minutes, " + days
	}
	if n, ok := step(hour); ok && num(min) {
		return "every " + n + " hours at minute " + min + ", " + days
	}
	return "on the cron expression " + strconv.Quote(expr)
}

func twoDigits(s string) string {
	if len(s) == 1 {
		return "0" + s
	}
	return s
}

// zoneName is the time zone a schedule is computed in: a cron
// expression's CRON_TZ= or TZ= prefix, else its tz, else UTC, as the
// cron package reads them.
func zoneName(s cron.ScheduleSpec) string {
	if s.Kind != cron.KindCron {
		return "UTC"
	}
	if s.TZ != "" {
		if _, err := time.LoadLocation(s.TZ); err != nil {
			return s.TZ
		}
	}
	sch, err := s.Build(0)
	cs, ok := sch.(*cron.CronSchedule)
	if err != nil || !ok {
		return "UTC"
	}
	return cs.Location().String()
}

// written is the schedule as written, field by field.
func written(s cron.ScheduleSpec) []note {
	out := []note{{"kind", s.Kind}}
	add := func(k, v string) {
		if v != "" {
			out = append(out, note{k, v})
		}
	}
	switch s.Kind {
	case cron.KindOnce:
		add("run_at", rfc(s.RunAt))
	case cron.KindEvery:
		add("every", durString(s.Every))
		add("start_at", rfc(s.StartAt))
		if s.Jitter > 0 {
			add("jitter", durString(s.Jitter))
		}
	case cron.KindCron:
		add("cron", s.Cron)
		add("tz", s.TZ)
	}
	return out
}

func rfc(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func durString(d cron.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// absLayout is the one absolute form of a time on every page, its zone
// named: "2026-11-27 22:57:25 UTC".
const absLayout = "2006-01-02 15:04:05 MST"

// abs writes t in UTC in the console's one absolute form; "" for the
// zero time.
func abs(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(absLayout)
}

// relative writes how far t is from now in one unit, rounded down: "now",
// "5 min ago", "in 3 s", "2 h ago", "in 4 d". The page's script uses
// the same rule to keep it current.
func relative(t, now time.Time) string {
	d := now.Sub(t)
	future := d < 0
	if future {
		d = -d
	}
	var n int64
	var unit string
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		n, unit = int64(d/time.Second), "s"
	case d < time.Hour:
		n, unit = int64(d/time.Minute), "min"
	case d < 48*time.Hour:
		n, unit = int64(d/time.Hour), "h"
	default:
		n, unit = int64(d/(24*time.Hour)), "d"
	}
	if future {
		return fmt.Sprintf("in %d %s", n, unit)
	}
	return fmt.Sprintf("%d %s ago", n, unit)
}

// durText writes a duration as the command line does ([cron.Duration]'s
// form: "5m", "14h", "1h30m", "1.5s"), a time.Duration rounded to the
// millisecond first (to the microsecond below a millisecond).
func durText(d any) string {
	switch v := d.(type) {
	case cron.Duration:
		return v.String()
	case time.Duration:
		if v >= time.Millisecond || v <= -time.Millisecond {
			v = v.Round(time.Millisecond)
		} else {
			v = v.Round(time.Microsecond)
		}
		return cron.Duration(v).String()
	}
	return fmt.Sprint(d)
}

// inZone formats t in the IANA zone name (UTC when unknown).
func inZone(t time.Time, zone string) string {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		loc = time.UTC
	}
	return t.In(loc).Format(absLayout)
}

// short cuts s to n bytes (at a rune boundary) with an ellipsis.
func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// thousands writes n with a comma between groups of three digits:
// "1,234,567".
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// funcs are the template functions.
var funcs = template.FuncMap{
	"rfc": rfc,
	"abs": abs,
	"ago": func(t time.Time) string { return relative(t, time.Now()) },
	"jobURL": func(base, id string) string {
		return base + "/jobs/" + url.PathEscape(id)
	},
	"runURL": func(base, id string) string {
		return base + "/runs/" + url.PathEscape(id)
	},
	"inZone": inZone,
	"zone":   zoneName,
	"dur":    durText,
	"num":    thousands,
	"short":  short,
	"inc":    func(i int) int { return i + 1 },
	"typeOf": func(j cron.Job) string {
		if j.IsHTTP() {
			return cron.JobTypeHTTP
		}
		return j.Type
	},
	"statusOf": func(s cron.Status) string {
		if s == "" {
			return "never run"
		}
		return string(s)
	},
	"json": func(v any) string {
		b, _ := json.MarshalIndent(v, "", "  ")
		return string(b)
	},
	"query": func(f filter, after string) template.URL {
		v := f.values()
		if after != "" {
			v.Set("after", after)
		}
		return template.URL(v.Encode())
	},
}
