package jobfuzz

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// source hands out values from fuzz bytes; past their end, zeros.
type source struct{ b []byte }

func (s *source) byte() byte {
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c
}

func (s *source) uint64() uint64 {
	var buf [8]byte
	n := copy(buf[:], s.b)
	s.b = s.b[n:]
	return binary.LittleEndian.Uint64(buf[:])
}

// string takes a length byte and that many bytes (any bytes: invalid
// UTF-8 and control characters included).
func (s *source) string() string {
	n := min(int(s.byte()%48), len(s.b))
	v := string(s.b[:n])
	s.b = s.b[n:]
	return v
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
	minTime  = time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime  = time.Date(2250, 1, 1, 0, 0, 0, 0, time.UTC)
)

// Fill returns a Job whose every field is set from data: strings of any
// bytes, times in UTC between the years 1700 and 2250 (or zero), any
// durations, integers, header maps of up to three entries (or nil), args
// that are JSON (or nil), and pointers to structs (nil, or a struct so
// filled). The job need not be valid.
func Fill(data []byte) cron.Job {
	var j cron.Job
	fill(&source{b: data}, reflect.ValueOf(&j).Elem(), "Job")
	return j
}

func fill(s *source, v reflect.Value, path string) {
	switch t := v.Type(); {
	case t == timeType:
		if s.byte()%4 == 0 {
			return // the zero time
		}
		span := uint64(maxTime.Sub(minTime))
		v.Set(reflect.ValueOf(minTime.Add(time.Duration(s.uint64() % span))))
	case t == rawType:
		switch s.byte() % 4 {
		case 0:
			return
		case 1:
			b, _ := json.Marshal(s.string())
			v.SetBytes(b)
		case 2:
			b, _ := json.Marshal(map[string]any{s.string(): []any{int64(s.uint64() >> 12), s.byte()%2 == 0, nil}})
			v.SetBytes(b)
		default:
			v.SetBytes([]byte(fmt.Sprint(int32(s.uint64()))))
		}
	case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct:
		if s.byte()%2 == 0 {
			return // nil
		}
		p := reflect.New(t.Elem())
		fill(s, p.Elem(), path)
		v.Set(p)
	case t.Kind() == reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				fill(s, v.Field(i), path+"."+t.Field(i).Name)
			}
		}
	case t.Kind() == reflect.String:
		v.SetString(s.string())
	case t.Kind() == reflect.Bool:
		v.SetBool(s.byte()%2 == 1)
	case t.Kind() == reflect.Int:
		// Mostly small, sometimes beyond int32.
		if s.byte()%8 == 0 {
			v.SetInt(int64(s.uint64()))
		} else {
			v.SetInt(int64(int16(s.uint64())))
		}
	case t.Kind() == reflect.Int64:
		v.SetInt(int64(s.uint64()))
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String:
		n := int(s.byte() % 4)
		if n == 0 {
			return
		}
		m := reflect.MakeMapWithSize(t, n)
		for range n {
			m.SetMapIndex(reflect.ValueOf(s.string()).Convert(t.Key()), reflect.ValueOf(s.string()).Convert(t.Elem()))
		}
		v.Set(m)
	default:
		panic(fmt.Sprintf("jobfuzz: %s has type %s, which Fill does not know: teach it", path, t))
	}
}

// Reference returns j as cron.Job's own JSON form carries it: j encoded by
// its MarshalJSON and decoded by its UnmarshalJSON. Invalid UTF-8 becomes
// U+FFFD, a start_at on a schedule that is not every is dropped, and so
// on: what every other codec of a job must give back too.
func Reference(j cron.Job) (cron.Job, error) {
	b, err := json.Marshal(j)
	if err != nil {
		return cron.Job{}, err
	}
	var out cron.Job
	if err := json.Unmarshal(b, &out); err != nil {
		return cron.Job{}, fmt.Errorf("cron.Job does not read back its own JSON %s: %w", b, err)
	}
	return out, nil
}

// SameJSON reports whether a and b hold the same JSON value (key order,
// white space and escapes aside); two empty values are the same.
func SameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
