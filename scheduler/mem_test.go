package scheduler_test

import (
	"context"
	"testing"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
)

// TestMemStores runs every suite of the plane's stores over the in-memory
// stores, the Dispatcher suite in fake time.
func TestMemStores(t *testing.T) {
	storetest.TestPlaneStores(t, storetest.PlaneAdapter{
		Synctest: true,
		Presence: func(*testing.T) scheduler.Presence { return scheduler.NewMemPresence() },
		Owners:   func(*testing.T) scheduler.Owners { return scheduler.NewMemOwners() },
		Snapshots: func(*testing.T) storetest.SnapshotHarness {
			s := scheduler.NewMemSnapshots()
			return storetest.SnapshotHarness{Store: s, Structures: memStructures(s)}
		},
		Streams: func(_ *testing.T, o storetest.StreamsOptions) storetest.StreamsHarness {
			s := scheduler.NewMemStreams(o.MaxLen, o.DLQMaxLen)
			return storetest.StreamsHarness{
				Sender: s,
				Inbox:  func(id, group string) scheduler.Inbox { return s.Inbox(id, group) },
				MaxLen: o.MaxLen,
			}
		},
		Storm: func(_ *testing.T, w scheduler.StormWindows) scheduler.StormGuard { return scheduler.NewMemStorm(w) },
		Jobs: func(t *testing.T, max int) scheduler.JobStore {
			s, err := scheduler.NewMemJobs(scheduler.MemJobsConfig{MaxAttempts: max})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Due: func(*testing.T) scheduler.DueIndex { return scheduler.NewMemDue() },
		JobsDue: func(t *testing.T) (scheduler.JobStore, storetest.DueProbe) {
			due := scheduler.NewMemDue()
			jobs, err := scheduler.NewMemJobs(scheduler.MemJobsConfig{Due: due})
			if err != nil {
				t.Fatal(err)
			}
			return jobs, due
		},
		Reservations: func(*testing.T) storetest.ReservationHarness {
			return storetest.ReservationHarness{Store: scheduler.NewMemReservations(scheduler.MemReservationsConfig{}), Synctest: true}
		},
		Turns: func(*testing.T) storetest.TurnHarness {
			s := scheduler.NewMemTurns()
			return storetest.TurnHarness{Store: s, CurrentTurn: func(_ *testing.T, id string) string { return s.CurrentTurn(id) }}
		},
		Dispatcher: func(t *testing.T) storetest.DispatcherHarness {
			st, err := scheduler.NewMemStores(storetest.DispatchTestConfig("x"))
			if err != nil {
				t.Fatal(err)
			}
			return storetest.DispatcherHarness{
				Stores: func() scheduler.Stores { return st },
				Poison: func(id string, f scheduler.Fields) error {
					_, err := st.Sender.Send(context.Background(), id, f)
					return err
				},
			}
		},
	})
}

func memStructures(s *scheduler.MemSnapshots) func(ctx context.Context, ids []string) (map[string]storetest.NodeStructures, error) {
	return func(ctx context.Context, ids []string) (map[string]storetest.NodeStructures, error) {
		out := map[string]storetest.NodeStructures{}
		for _, id := range ids {
			var n storetest.NodeStructures
			n.InAll, n.InLastSeen, n.HasPresence, n.HasSnapshot = s.Has(id)
			out[id] = n
		}
		return out, nil
	}
}
