package cron_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/store/storetest"
)

func TestMemStoreConformance(t *testing.T) {
	storetest.TestCronStore(t, func(t *testing.T) cron.Store { return cron.NewMemStore() })
}

func TestMemStoreHandlers(t *testing.T) {
	storetest.TestCronHandlers(t, func(t *testing.T) cron.Store { return cron.NewMemStore() })
}

func TestMemStoreSmallLimit(t *testing.T) {
	storetest.TestCronStore(t, func(t *testing.T) cron.Store { return &cron.MemStore{RunLimit: 3} })
}

// TestMemStoreCompaction deletes most of many jobs, which makes the store
// close its holes, and checks order, lookups and bookkeeping afterwards.
func TestMemStoreCompaction(t *testing.T) {
	ctx := context.Background()
	s := cron.NewMemStore()
	var want []string
	for i := range 1000 {
		id := fmt.Sprintf("j%04d", i)
		if err := s.Save(ctx, cron.Job{ID: id, Name: id}); err != nil {
			t.Fatal(err)
		}
		if i%4 == 0 {
			want = append(want, id)
		}
	}
	for i := range 1000 {
		if i%4 != 0 {
			if err := s.Delete(ctx, fmt.Sprintf("j%04d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Save(ctx, cron.Job{ID: "last"}); err != nil {
		t.Fatal(err)
	}
	want = append(want, "last")
	for _, id := range want {
		if err := s.Record(ctx, id, cron.Bookkeeping{LastStatus: cron.StatusSuccess, LastError: id}); err != nil {
			t.Fatalf("Record(%s): %v", id, err)
		}
	}
	jobs, _ := s.Load(ctx)
	var got []string
	for _, j := range jobs {
		got = append(got, j.ID)
		if j.LastError != j.ID {
			t.Errorf("job %s has the bookkeeping of %q", j.ID, j.LastError)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jobs after compaction (-want +got):\n%s", diff)
	}
	if err := s.Record(ctx, "j0001", cron.Bookkeeping{}); !errors.Is(err, cron.ErrNotFound) {
		t.Errorf("Record(deleted) error = %v, want ErrNotFound", err)
	}
}
