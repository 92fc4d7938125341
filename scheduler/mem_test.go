package scheduler_test

import (
	"context"
	"testing"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
)

func TestMemPresence(t *testing.T) {
	t.Parallel()
	storetest.TestPresence(t, func(t *testing.T) scheduler.Presence { return scheduler.NewMemPresence() })
}

func TestMemOwners(t *testing.T) {
	t.Parallel()
	storetest.TestOwners(t, func(t *testing.T) scheduler.Owners { return scheduler.NewMemOwners() })
}

func TestMemSnapshots(t *testing.T) {
	t.Parallel()
	storetest.TestNodeSnapshots(t, func(t *testing.T) storetest.SnapshotHarness {
		s := scheduler.NewMemSnapshots()
		return storetest.SnapshotHarness{Store: s, Structures: memStructures(s)}
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

func TestMemStreams(t *testing.T) {
	t.Parallel()
	storetest.TestStreams(t, func(t *testing.T, o storetest.StreamsOptions) storetest.StreamsHarness {
		s := scheduler.NewMemStreams(o.MaxLen, o.DLQMaxLen)
		return storetest.StreamsHarness{
			Sender: s,
			Inbox:  func(id, group string) scheduler.Inbox { return s.Inbox(id, group) },
			MaxLen: o.MaxLen,
		}
	})
}

func TestMemStorm(t *testing.T) {
	t.Parallel()
	storetest.TestStorm(t, func(t *testing.T, w scheduler.StormWindows) scheduler.StormGuard { return scheduler.NewMemStorm(w) })
}
