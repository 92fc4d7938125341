package jsonstore

import (
	"encoding/json"
	"testing"
	"time"

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
