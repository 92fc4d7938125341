package jsonstore

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/internal/jobfuzz"
)

// FuzzCodecs holds the store's codec to cron.Job's own JSON form: a job
// with every field set (by reflection, so a field added to cron.Job is
// set too) must come back as cron.Job's MarshalJSON and UnmarshalJSON
// bring it back, through each path of the store: appendJob read by the
// fast decoder, appendJob read by the general decoder, and the output of
// MarshalJSON read by both. A field that appendJob, fileJob or the fast
// decoder leaves out fails here.
func FuzzCodecs(f *testing.F) {
	f.Add([]byte("seed"))
	f.Add([]byte("\x05abcde\x01\x00\x10\x20\x30\x40\x50\x60\x70\x80\x03\x02xy\x02zw\x01q"))
	f.Add(make([]byte, 300))
	all := make([]byte, 600)
	for i := range all {
		all[i] = byte(i*7 + 3)
	}
	f.Add(all)
	f.Fuzz(func(t *testing.T, data []byte) {
		j := jobfuzz.Fill(data)
		want, err := jobfuzz.Reference(j)
		if err != nil {
			t.Skip(err) // a value cron.Job's JSON cannot carry; not this codec's
		}
		std, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		fast := appendJob(nil, &j)
		for _, in := range []struct {
			name string
			b    []byte
		}{{"appendJob", fast}, {"MarshalJSON", std}} {
			doc := appendDocument(nil, t0, [][]byte{in.b})
			if _, fjs, ok := fastDecode(doc); ok {
				got, field, err := fjs[0].job()
				if err != nil {
					t.Fatalf("%s read by the fast decoder: field %s: %v\n%s", in.name, field, err, in.b)
				}
				check(t, in.name+" read by the fast decoder", want, got)
				if where := pointInto(reflect.ValueOf(got), doc, "job"); where != "" {
					t.Fatalf("%s read by the fast decoder: %s points into the file's bytes, which it would keep alive", in.name, where)
				}
			}
			fj, err := strictFileJob(in.b)
			if err != nil {
				t.Fatalf("%s read by the general decoder: %v\n%s", in.name, err, in.b)
			}
			got, field, err := fj.job()
			if err != nil {
				t.Fatalf("%s read by the general decoder: field %s: %v\n%s", in.name, field, err, in.b)
			}
			check(t, in.name+" read by the general decoder", want, got)
		}
		// What the store keeps in memory gives the job back as well.
		var e entry
		var c shapes
		e.set(&want, &c)
		check(t, "the store's entry", want, e.job())
	})
}

// pointInto returns the path of a string, byte slice or map key held in v
// whose bytes lie in buf, or "".
func pointInto(v reflect.Value, buf []byte, path string) string {
	if len(buf) == 0 {
		return ""
	}
	lo, hi := uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&buf[len(buf)-1]))
	in := func(p unsafe.Pointer) bool { return p != nil && uintptr(p) >= lo && uintptr(p) <= hi }
	switch v.Kind() {
	case reflect.String:
		if s := v.String(); s != "" && in(unsafe.Pointer(unsafe.StringData(s))) {
			return path
		}
	case reflect.Slice:
		if v.Len() > 0 && in(v.UnsafePointer()) {
			return path
		}
		for i := range v.Len() {
			if w := pointInto(v.Index(i), buf, fmt.Sprintf("%s[%d]", path, i)); w != "" {
				return w
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			k := fmt.Sprint(it.Key())
			if w := pointInto(it.Key(), buf, path+" key "+k); w != "" {
				return w
			}
			if w := pointInto(it.Value(), buf, path+"["+k+"]"); w != "" {
				return w
			}
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return pointInto(v.Elem(), buf, path)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if w := pointInto(v.Field(i), buf, path+"."+v.Type().Field(i).Name); w != "" {
				return w
			}
		}
	}
	return ""
}

func check(t *testing.T, what string, want, got cron.Job) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmp.Comparer(jobfuzz.SameJSON)); diff != "" {
		t.Errorf("%s (-cron.Job's JSON +got):\n%s", what, diff)
	}
}

// TestFastDecodeTyped: a file holding Go function jobs stays on the fast
// decoder (a job with args must not send the whole file to the general
// one), and reads their type and args.
func TestFastDecodeTyped(t *testing.T) {
	t.Parallel()
	j := cron.Job{ID: "rep", Type: "report", Args: json.RawMessage(`{"team":"core","tags":["a\"b","\u00e9"],"n":-1.5e3}`),
		Schedule: cron.Every(time.Minute), Timeout: cron.Duration(time.Second), RetryBackoff: cron.Duration(time.Second)}
	h := testJob("web")
	doc := appendDocument(nil, t0, [][]byte{appendJob(nil, &j), appendJob(nil, &h)})
	_, fjs, ok := fastDecode(doc)
	if !ok {
		t.Fatalf("the fast decoder refused:\n%s", doc)
	}
	got, _, err := fjs[0].job()
	if err != nil || got.Type != "report" || !jobfuzz.SameJSON(got.Args, j.Args) || got.WritesHTTP() {
		t.Errorf("read back: %+v, %v", got, err)
	}
}

// TestDecodedJobsHoldNoView checks, on a job with headers, an alert and
// the usual fields, that the fast decoder hands on no string that points
// into the file's bytes (its views are for what it parses and drops).
func TestDecodedJobsHoldNoView(t *testing.T) {
	j := cron.Job{ID: "job-1", Name: "nightly report", Type: "http",
		HTTP: cron.HTTPConfig{Method: "POST", URL: "http://example.com/hook", Body: `{"n":1}`,
			Headers: map[string]string{"X-Token": "abc", "Content-Type": "application/json"}},
		Schedule:   cron.ScheduleSpec{Kind: cron.KindCron, Cron: "0 3 * * *", TZ: "Europe/Paris"},
		Timeout:    cron.Duration(time.Second),
		LastStatus: cron.StatusFailed, LastError: "boom", LastAlert: "failing",
		Alert: &cron.AlertConfig{URL: "http://example.com/alert", Notify: "failing"}}
	doc := appendDocument(nil, t0, [][]byte{appendJob(nil, &j)})
	_, fjs, ok := fastDecode(doc)
	if !ok {
		t.Fatal("the fast decoder did not read the document")
	}
	got, field, err := fjs[0].job()
	if err != nil {
		t.Fatalf("field %s: %v", field, err)
	}
	if got.HTTP.Headers["X-Token"] != "abc" || got.Name != j.Name || got.ID != j.ID {
		t.Fatalf("decoded %+v", got)
	}
	if where := pointInto(reflect.ValueOf(got), doc, "job"); where != "" {
		t.Fatalf("%s points into the file's bytes, which it would keep alive", where)
	}
}
