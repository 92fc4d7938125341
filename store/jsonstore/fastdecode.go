package jsonstore

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/ksana-dev/ksana/cron"
)

// fastDecode reads a jobs.json in the plain form this package writes,
// without reflection: it is what makes a start with 100,000 jobs quick. It
// understands a strict subset of JSON (no \u escapes, no null values, only
// the known fields) and returns ok = false for anything else, leaving the
// file to the general decoder, which accepts all JSON and reports errors
// field by field. Whatever it accepts, it decodes as encoding/json would
// (FuzzFastDecode checks this).
func fastDecode(data []byte) (version int, jobs []fileJob, ok bool) {
	var parts [2][]fileJob
	version, n, ok := fastDecodeEach(data, func(part, k int, fj *fileJob) {
		parts[part] = append(parts[part], *fj)
	})
	if !ok {
		return 0, nil, false
	}
	return version, append(parts[0][:n[0]], parts[1][:n[1]]...), true
}

// fastDecodeEach is fastDecode handing each job to each instead of
// returning them all: each(part, k, fj) gets the k-th job of part 0 (the
// file from its start) or part 1 (from a boundary near the middle, read on
// a second goroutine when the file is large), concurrently for the two
// parts; fj is reused once each returns. The jobs are, in file order, the
// first n[0] of part 0 then the first n[1] of part 1 (part 1 may have
// been read and then dropped: n[1] is then 0).
func fastDecodeEach(data []byte, each func(part, k int, fj *fileJob)) (version int, n [2]int, ok bool) {
	s := &scanner{b: data}
	sawJobs := false
	ok = s.object(func(key string) bool {
		switch key {
		case "version":
			v, ok := s.int()
			version = v
			return ok
		case "updated_at":
			var at string
			return s.view(&at)
		case "jobs":
			if sawJobs {
				return false
			}
			sawJobs = true
			return s.jobsArray(each, &n)
		}
		return false
	})
	s.ws()
	if !ok || s.i != len(s.b) {
		return 0, [2]int{}, false
	}
	return version, n, true
}

// jobsArray reads the jobs array, on two goroutines when it is large: the
// second reads from an element boundary found near the middle, and its
// jobs are taken only when the first, reading from the start, reaches that
// very boundary (so a boundary guessed wrong costs time, never a wrong
// result).
func (s *scanner) jobsArray(each func(part, k int, fj *fileJob), n *[2]int) bool {
	if !s.consume('[') {
		return false
	}
	if s.consume(']') {
		return true
	}
	split := -1
	if len(s.b)-s.i > 4<<20 {
		split = elementStart(s.b, s.i+(len(s.b)-s.i)/2)
	}
	type half struct {
		n   int
		end int
		ok  bool
	}
	var second chan half
	if split > 0 {
		second = make(chan half, 1)
		go func() {
			t := &scanner{b: s.b, i: split}
			k, ok := t.elements(func(k int, fj *fileJob) { each(1, k, fj) })
			second <- half{k, t.i, ok}
		}()
	}
	wait := func() half {
		if second == nil {
			return half{}
		}
		h := <-second
		second = nil
		return h
	}
	var fj fileJob
	for {
		s.ws()
		if second != nil && s.i >= split {
			h := wait()
			if s.i == split {
				if !h.ok {
					return false
				}
				n[1] = h.n
				s.i = h.end
				return true
			}
			// Not a boundary after all: go on alone.
		}
		fj = fileJob{}
		if !s.job(&fj) {
			wait()
			return false
		}
		each(0, n[0], &fj)
		n[0]++
		if s.consume(',') {
			continue
		}
		wait()
		return s.consume(']')
	}
}

// elements reads jobs separated by commas up to and including the closing
// bracket of the array, handing each to each; it returns how many.
func (s *scanner) elements(each func(k int, fj *fileJob)) (int, bool) {
	var fj fileJob
	for k := 0; ; k++ {
		fj = fileJob{}
		if !s.job(&fj) {
			return k, false
		}
		each(k, &fj)
		if s.consume(',') {
			continue
		}
		return k + 1, s.consume(']')
	}
}

// elementStart returns the offset of a '{' at or after from that follows a
// comma and a newline (so, in valid JSON, outside any string: a string
// holds no raw newline), or -1 when there is none in the next MiB.
func elementStart(b []byte, from int) int {
	limit := min(len(b), from+1<<20)
	for i := from; i < limit; i++ {
		if b[i] != '\n' {
			continue
		}
		j := i + 1
		for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\r' || b[j] == '\n') {
			j++
		}
		if j >= len(b) || b[j] != '{' {
			continue
		}
		k := i - 1
		for k >= 0 && (b[k] == ' ' || b[k] == '\t' || b[k] == '\r') {
			k--
		}
		if k >= 0 && b[k] == ',' {
			return j
		}
	}
	return -1
}

type scanner struct {
	b []byte
	i int
	// intern holds the values of fields that many jobs share (method, URL,
	// kind, durations...), so that each is allocated once, and the jobs
	// share it.
	intern map[string]string
}

// view reads a string that is parsed and dropped (a time, an object's
// key) or copied before the job is handed on (its id and name, see job):
// in the common case it is not copied but points into the file's bytes,
// which the decoder neither changes nor keeps. convertJob parses such
// fields into values and never keeps the string itself (its errors quote
// a copy). No string of a decoded job points into the file (FuzzCodecs
// and TestDecodedJobsHoldNoView check it).
func (s *scanner) view(dst *string) bool {
	if !s.consume('"') {
		return false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == '"' {
			raw := s.b[start:s.i]
			if len(raw) == 0 {
				*dst = ""
			} else {
				*dst = unsafe.String(&raw[0], len(raw))
			}
			s.i++
			return true
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		s.i++
	}
	s.i = start - 1
	return s.into(dst)
}

// maxInterned bounds the values interned: past it, values are allocated.
const maxInterned = 1 << 14

// shared reads a string that many jobs may share, interned.
func (s *scanner) shared(dst *string) bool {
	if !s.consume('"') {
		return false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw := s.b[start:s.i]
			if len(raw) > 256 {
				break
			}
			if v, ok := s.intern[string(raw)]; ok { // no allocation
				s.i++
				*dst = v
				return true
			}
			if !utf8.Valid(raw) {
				return false
			}
			s.i++
			v := string(raw)
			if s.intern == nil {
				s.intern = make(map[string]string)
			}
			if len(s.intern) < maxInterned {
				s.intern[v] = v
			}
			*dst = v
			return true
		case c == '\\' || c < 0x20:
		default:
			s.i++
			continue
		}
		break
	}
	// Escapes, control characters or a long value: the general path.
	s.i = start - 1
	return s.into(dst)
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) consume(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// object reads {"key": value, ...}, calling field for each key with the
// scanner before the value. A key is most often a view of the buffer
// (see view), valid while it is read: a field that keeps it copies it.
func (s *scanner) object(field func(key string) bool) bool {
	if !s.consume('{') {
		return false
	}
	if s.consume('}') {
		return true
	}
	for {
		var key string
		if !s.view(&key) || !s.consume(':') || !field(key) {
			return false
		}
		if s.consume(',') {
			continue
		}
		return s.consume('}')
	}
}

// str reads a string with at most the short escapes; \u escapes, control
// characters and invalid UTF-8 are left to the general decoder.
func (s *scanner) str() (string, bool) {
	if !s.consume('"') {
		return "", false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw := s.b[start:s.i]
			s.i++
			if !utf8.Valid(raw) {
				return "", false
			}
			return string(raw), true
		case c == '\\':
			return s.escaped(start)
		case c < 0x20:
			return "", false
		}
		s.i++
	}
	return "", false
}

func (s *scanner) escaped(start int) (string, bool) {
	buf := append([]byte(nil), s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			if !utf8.Valid(buf) {
				return "", false
			}
			return string(buf), true
		case c < 0x20:
			return "", false
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return "", false
			}
			var r byte
			switch s.b[s.i+1] {
			case '"', '\\', '/':
				r = s.b[s.i+1]
			case 'b':
				r = '\b'
			case 'f':
				r = '\f'
			case 'n':
				r = '\n'
			case 'r':
				r = '\r'
			case 't':
				r = '\t'
			default:
				return "", false
			}
			buf = append(buf, r)
			s.i += 2
			continue
		}
		buf = append(buf, c)
		s.i++
	}
	return "", false
}

// int reads a JSON integer without fraction or exponent that fits an int32.
func (s *scanner) int() (int, bool) {
	s.ws()
	neg := false
	if s.i < len(s.b) && s.b[s.i] == '-' {
		neg = true
		s.i++
	}
	start := s.i
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		n = n*10 + int(s.b[s.i]-'0')
		if n > 1<<31 {
			return 0, false
		}
		s.i++
	}
	digits := s.i - start
	if digits == 0 || (digits > 1 && s.b[start] == '0') {
		return 0, false
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	if neg {
		n = -n
	}
	return n, true
}

func (s *scanner) boolean() (bool, bool) {
	s.ws()
	switch {
	case len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "true":
		s.i += 4
		return true, true
	case len(s.b)-s.i >= 5 && string(s.b[s.i:s.i+5]) == "false":
		s.i += 5
		return false, true
	}
	return false, false
}

func (s *scanner) into(dst *string) bool {
	v, ok := s.str()
	*dst = v
	return ok
}

// raw reads any JSON value and sets dst to a copy of its bytes. It finds
// the value's end by counting brackets outside strings, then leaves the
// checking of it to json.Valid: args are rare, and small.
func (s *scanner) raw(dst *json.RawMessage) bool {
	s.ws()
	start, depth := s.i, 0
scan:
	for ; s.i < len(s.b); s.i++ {
		switch s.b[s.i] {
		case '"':
			for s.i++; s.i < len(s.b) && s.b[s.i] != '"'; s.i++ {
				if s.b[s.i] == '\\' {
					s.i++
				}
			}
			if depth == 0 {
				s.i++
				break scan
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				break scan
			}
			if depth--; depth == 0 {
				s.i++
				break scan
			}
		case ',':
			if depth == 0 {
				break scan
			}
		}
	}
	s.i = min(s.i, len(s.b))
	v := bytes.TrimRight(s.b[start:s.i], " \t\r\n")
	if len(v) == 0 || !json.Valid(v) {
		return false
	}
	*dst = append(json.RawMessage(nil), v...)
	return true
}

func (s *scanner) job(j *fileJob) bool {
	ok := s.object(func(key string) bool {
		switch key {
		case "id":
			return s.view(&j.ID)
		case "name":
			return s.view(&j.Name)
		case "enabled":
			v, ok := s.boolean()
			j.Enabled = v
			return ok
		case "paused_until":
			return s.view(&j.PausedUntil)
		case "paused_at":
			return s.view(&j.PausedAt)
		case "type":
			return s.shared(&j.Type)
		case "http":
			return s.object(func(key string) bool {
				switch key {
				case "method":
					return s.shared(&j.HTTP.Method)
				case "url":
					return s.shared(&j.HTTP.URL)
				case "body":
					return s.shared(&j.HTTP.Body)
				case "headers":
					if j.HTTP.Headers != nil {
						return false
					}
					j.HTTP.Headers = map[string]string{}
					return s.object(func(key string) bool {
						v, ok := s.str()
						j.HTTP.Headers[strings.Clone(key)] = v // key is a view
						return ok
					})
				}
				return false
			})
		case "args":
			if j.Args != nil {
				return false
			}
			return s.raw(&j.Args)
		case "schedule":
			return s.object(func(key string) bool {
				switch key {
				case "kind":
					return s.shared(&j.Schedule.Kind)
				case "run_at":
					return s.view(&j.Schedule.RunAt)
				case "every":
					return s.shared(&j.Schedule.Every)
				case "start_at":
					return s.view(&j.Schedule.StartAt)
				case "jitter":
					return s.shared(&j.Schedule.Jitter)
				case "cron":
					return s.shared(&j.Schedule.Cron)
				case "tz":
					return s.shared(&j.Schedule.TZ)
				}
				return false
			})
		case "timeout":
			return s.shared(&j.Timeout)
		case "max_retries":
			v, ok := s.int()
			j.MaxRetries = v
			return ok
		case "keep_runs":
			v, ok := s.int()
			j.KeepRuns = v
			return ok
		case "retry_backoff":
			return s.shared(&j.RetryBackoff)
		case "misfire_grace":
			return s.shared(&j.MisfireGrace)
		case "last_run_at":
			return s.view(&j.LastRunAt)
		case "next_run_at":
			return s.view(&j.NextRunAt)
		case "last_status":
			return s.shared(&j.LastStatus)
		case "last_error":
			return s.shared(&j.LastError)
		case "failures":
			v, ok := s.int()
			j.Failures = v
			return ok
		case "last_alert":
			return s.shared(&j.LastAlert)
		case "alert":
			if j.Alert != nil {
				return false
			}
			a := &cron.AlertConfig{}
			j.Alert = a
			return s.object(func(key string) bool {
				switch key {
				case "url":
					return s.into(&a.URL)
				case "secret":
					return s.into(&a.Secret)
				case "after":
					v, ok := s.int()
					a.After = v
					return ok
				case "pause_after":
					v, ok := s.int()
					a.PauseAfter = v
					return ok
				case "missed_every":
					var v string
					if !s.into(&v) {
						return false
					}
					d, err := time.ParseDuration(v)
					a.MissedEvery = cron.Duration(d)
					return err == nil
				case "notify":
					return s.into(&a.Notify)
				}
				return false
			})
		}
		return false
	})
	// The id and name were read as views of the file: both are copied
	// into one string, one allocation a job instead of two.
	var b strings.Builder
	b.Grow(len(j.ID) + len(j.Name))
	b.WriteString(j.ID)
	b.WriteString(j.Name)
	both := b.String()
	j.ID, j.Name = both[:len(j.ID)], both[len(j.ID):]
	return ok
}
