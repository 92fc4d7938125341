package scheduler_test

import (
	"sync"
	"testing"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
)

func TestMemTurns(t *testing.T) {
	storetest.TestTurnStore(t, func(t *testing.T) storetest.TurnHarness {
		var mu sync.Mutex
		online := map[string]bool{}
		return storetest.TurnHarness{
			Store: scheduler.NewMemTurns(func(n string) bool {
				mu.Lock()
				defer mu.Unlock()
				return online[n]
			}),
			SetOnline: func(t *testing.T, n string, on bool) {
				mu.Lock()
				online[n] = on
				mu.Unlock()
			},
		}
	})
}
