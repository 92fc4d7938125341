package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
)

func TestMemRequests(t *testing.T) {
	storetest.TestRequestStore(t, func(t *testing.T) scheduler.RequestStore {
		s, err := scheduler.NewMemRequests(scheduler.MemRequestsConfig{WaitTimeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestMemRequestsBindingTTL(t *testing.T) { synctest.Test(t, testMemRequestsBindingTTL) }

func testMemRequestsBindingTTL(t *testing.T) {
	ctx := context.Background()
	s, err := scheduler.NewMemRequests(scheduler.MemRequestsConfig{BindingTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	create := func(context.Context) (scheduler.RequestBinding, error) {
		n++
		return scheduler.RequestBinding{JobID: "job-" + string(rune('0'+n))}, nil
	}
	first, _, _ := s.Bind(ctx, "r", create)
	time.Sleep(59 * time.Second)
	again, created, _ := s.Bind(ctx, "r", create)
	if created || again.JobID != first.JobID {
		t.Errorf("Bind within the TTL = %+v, created %v; want %+v", again, created, first)
	}
	time.Sleep(time.Second)
	later, created, _ := s.Bind(ctx, "r", create)
	if !created || later.JobID != "job-2" {
		t.Errorf("Bind after the TTL = %+v, created %v; want job-2 created", later, created)
	}
}

func TestDecodeRequestBinding(t *testing.T) {
	tests := []struct {
		in      string
		want    scheduler.RequestBinding
		wantErr bool
	}{
		{`{"job_id":"j1"}`, scheduler.RequestBinding{JobID: "j1"}, false},
		{`{"job_id":"j1","node_id":"n","data":{"a":1},"extra":true}`, scheduler.RequestBinding{JobID: "j1", NodeID: "n", Data: json.RawMessage(`{"a":1}`)}, false},
		{``, scheduler.RequestBinding{}, true},
		{`{"job_id":""}`, scheduler.RequestBinding{}, true},
		{`{"node_id":"n"}`, scheduler.RequestBinding{}, true},
		{`{"job_id":"j1"} {}`, scheduler.RequestBinding{}, true},
		{`{"job_id":5}`, scheduler.RequestBinding{}, true},
		{`[1]`, scheduler.RequestBinding{}, true},
	}
	for _, tt := range tests {
		got, err := scheduler.DecodeRequestBinding([]byte(tt.in))
		if (err != nil) != tt.wantErr {
			t.Errorf("DecodeRequestBinding(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
		}
		if err != nil && !errors.Is(err, scheduler.ErrBindingCorrupt) {
			t.Errorf("DecodeRequestBinding(%q) error = %v, want ErrBindingCorrupt", tt.in, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("DecodeRequestBinding(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func FuzzDecodeRequestBinding(f *testing.F) {
	f.Add([]byte(`{"job_id":"j1","node_id":"n","data":{"a":[1,2]}}`))
	f.Add([]byte(`{"job_id":""}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := scheduler.DecodeRequestBinding(data)
		if err != nil {
			if !errors.Is(err, scheduler.ErrBindingCorrupt) {
				t.Fatalf("error %v does not wrap ErrBindingCorrupt", err)
			}
			return
		}
		enc, err := scheduler.EncodeRequestBinding(b)
		if err != nil {
			t.Fatalf("a decoded binding does not encode: %v", err)
		}
		back, err := scheduler.DecodeRequestBinding(enc)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if back.JobID != b.JobID || back.NodeID != b.NodeID {
			t.Fatalf("round trip %+v -> %+v", b, back)
		}
	})
}

// TestMemRequestsWaitTimeout: a duplicate stops waiting for a create that
// does not end after WaitTimeout (in a synctest bubble: no real wait).
func TestMemRequestsWaitTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, err := scheduler.NewMemRequests(scheduler.MemRequestsConfig{WaitTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		release, entered := make(chan struct{}), make(chan struct{})
		go s.Bind(ctx, "r", func(context.Context) (scheduler.RequestBinding, error) {
			close(entered)
			<-release
			return scheduler.RequestBinding{JobID: "j"}, nil
		})
		<-entered
		start := time.Now()
		_, _, err = s.Bind(ctx, "r", func(context.Context) (scheduler.RequestBinding, error) {
			t.Error("a duplicate called create")
			return scheduler.RequestBinding{}, nil
		})
		if !errors.Is(err, scheduler.ErrBindWait) {
			t.Errorf("Bind behind a stuck create: error = %v, want ErrBindWait", err)
		}
		if waited := time.Since(start); waited != 5*time.Second {
			t.Errorf("waited %v, want the WaitTimeout of 5s", waited)
		}
		close(release)
		synctest.Wait()
	})
}
