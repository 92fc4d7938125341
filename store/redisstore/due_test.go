package redisstore

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestDueReadsWhatItNeeds: a claim reads a shard when this process wrote
// a deadline there, when the earliest deadline it saw there is due, and
// every DueRefresh; a deadline another process wrote is found at the
// refresh. Two Dues on one prefix stand for two processes; the claims'
// clock is the argument, so the refresh is reached without waiting.
func TestDueReadsWhatItNeeds(t *testing.T) {
	ctx := context.Background()
	for _, srv := range testServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			prefix := testPrefix(t)
			here, err := NewDue(srv.client, DueConfig{Prefix: prefix})
			must(t, err)
			other, err := NewDue(srv.client, DueConfig{Prefix: prefix})
			must(t, err)
			now := time.Now()
			claim := func(at time.Time) []string {
				t.Helper()
				ids, err := here.Claim(ctx, at, time.Minute, 100)
				must(t, err)
				slices.Sort(ids)
				return ids
			}
			if ids := claim(now); len(ids) != 0 {
				t.Fatalf("empty index: claimed %v", ids)
			}
			// Written here: claimed at the next sweep that it is due.
			must(t, here.Set(ctx, "mine", now.Add(time.Second)))
			if ids := claim(now); len(ids) != 0 {
				t.Fatalf("claimed %v before its deadline", ids)
			}
			if ids := claim(now.Add(time.Second)); !slices.Equal(ids, []string{"mine"}) {
				t.Fatalf("at its deadline: claimed %v, want [mine]", ids)
			}
			// The claim moved what it took: the shard is read once more.
			if ids := claim(now.Add(time.Second)); len(ids) != 0 {
				t.Fatalf("claimed %v again within its lease", ids)
			}
			// Written by another process, one due and one due later: this
			// one does not read the shards again until the refresh...
			at := now.Add(time.Second)
			refresh := at.Add(DueRefresh)
			must(t, other.Set(ctx, "theirs", now))
			must(t, other.Set(ctx, "later", refresh.Add(500*time.Millisecond)))
			if ids := claim(at); len(ids) != 0 {
				t.Fatalf("claimed %v before the refresh: the shards were read again", ids)
			}
			// ...and finds the one due then...
			if ids := claim(refresh); !slices.Equal(ids, []string{"theirs"}) {
				t.Fatalf("at the refresh: claimed %v, want [theirs]", ids)
			}
			// ...and the other one, which that read saw, when it is due.
			if ids := claim(refresh.Add(500 * time.Millisecond)); !slices.Equal(ids, []string{"later"}) {
				t.Fatalf("at its deadline, before the next refresh: claimed %v, want [later]", ids)
			}
		})
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
