package jsonstore

import (
	"bytes"
	"unicode/utf8"
)

// fastDecode reads a jobs.json in the plain form this package writes,
// without reflection: it is what makes a start with 100,000 jobs quick. It
// understands a strict subset of JSON (no \u escapes, no null values, only
// the known fields) and returns ok = false for anything else, leaving the
// file to the general decoder, which accepts all JSON and reports errors
// field by field. Whatever it accepts, it decodes as encoding/json would
// (FuzzFastDecode checks this).
func fastDecode(data []byte) (version int, jobs []fileJob, ok bool) {
	s := &scanner{b: data}
	sawJobs := false
	ok = s.object(func(key string) bool {
		switch key {
		case "version":
			v, ok := s.int()
			version = v
			return ok
		case "updated_at":
			_, ok := s.str()
			return ok
		case "jobs":
			if sawJobs {
				return false
			}
			sawJobs = true
			// One job per line in the files this package writes.
			jobs = make([]fileJob, 0, bytes.Count(s.b[s.i:], []byte{'\n'})+1)
			return s.array(func() bool {
				jobs = append(jobs, fileJob{})
				return s.job(&jobs[len(jobs)-1])
			})
		}
		return false
	})
	s.ws()
	if !ok || s.i != len(s.b) {
		return 0, nil, false
	}
	return version, jobs, true
}

type scanner struct {
	b []byte
	i int
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
// scanner before the value.
func (s *scanner) object(field func(key string) bool) bool {
	if !s.consume('{') {
		return false
	}
	if s.consume('}') {
		return true
	}
	for {
		key, ok := s.str()
		if !ok || !s.consume(':') || !field(key) {
			return false
		}
		if s.consume(',') {
			continue
		}
		return s.consume('}')
	}
}

func (s *scanner) array(elem func() bool) bool {
	if !s.consume('[') {
		return false
	}
	if s.consume(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if s.consume(',') {
			continue
		}
		return s.consume(']')
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

func (s *scanner) job(j *fileJob) bool {
	return s.object(func(key string) bool {
		switch key {
		case "id":
			return s.into(&j.ID)
		case "name":
			return s.into(&j.Name)
		case "enabled":
			v, ok := s.boolean()
			j.Enabled = v
			return ok
		case "type":
			return s.into(&j.Type)
		case "http":
			return s.object(func(key string) bool {
				switch key {
				case "method":
					return s.into(&j.HTTP.Method)
				case "url":
					return s.into(&j.HTTP.URL)
				case "body":
					return s.into(&j.HTTP.Body)
				case "headers":
					if j.HTTP.Headers != nil {
						return false
					}
					j.HTTP.Headers = map[string]string{}
					return s.object(func(key string) bool {
						v, ok := s.str()
						j.HTTP.Headers[key] = v
						return ok
					})
				}
				return false
			})
		case "schedule":
			return s.object(func(key string) bool {
				switch key {
				case "kind":
					return s.into(&j.Schedule.Kind)
				case "run_at":
					return s.into(&j.Schedule.RunAt)
				case "every":
					return s.into(&j.Schedule.Every)
				case "start_at":
					return s.into(&j.Schedule.StartAt)
				case "jitter":
					return s.into(&j.Schedule.Jitter)
				case "cron":
					return s.into(&j.Schedule.Cron)
				case "tz":
					return s.into(&j.Schedule.TZ)
				}
				return false
			})
		case "timeout":
			return s.into(&j.Timeout)
		case "max_retries":
			v, ok := s.int()
			j.MaxRetries = v
			return ok
		case "retry_backoff":
			return s.into(&j.RetryBackoff)
		case "misfire_grace":
			return s.into(&j.MisfireGrace)
		case "last_run_at":
			return s.into(&j.LastRunAt)
		case "next_run_at":
			return s.into(&j.NextRunAt)
		case "last_status":
			return s.into(&j.LastStatus)
		case "last_error":
			return s.into(&j.LastError)
		}
		return false
	})
}
