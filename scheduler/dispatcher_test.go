package scheduler_test

import (
	"context"
	"testing"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
)

func TestMemDispatcher(t *testing.T) {
	storetest.TestDispatcherSynctest(t, func(t *testing.T) storetest.DispatcherHarness {
		st, err := scheduler.NewMemStores(storetest.DispatchTestConfig("x"))
		if err != nil {
			t.Fatal(err)
		}
		return storetest.DispatcherHarness{
			Stores: func() scheduler.Stores { return st },
			Poison: func(id string, f map[string]string) error {
				_, err := st.Sender.Send(context.Background(), id, f)
				return err
			},
		}
	})
}

func TestMemBook(t *testing.T) {
	t.Parallel()
	storetest.TestJobBook(t, func(t *testing.T) scheduler.JobBook { return scheduler.NewMemBook() })
}

func TestMemDue(t *testing.T) {
	t.Parallel()
	storetest.TestDueIndex(t, func(t *testing.T) scheduler.DueIndex { return scheduler.NewMemDue() })
}
