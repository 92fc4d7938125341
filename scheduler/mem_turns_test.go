package scheduler_test

import (
	"testing"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
)

func TestMemTurns(t *testing.T) {
	storetest.TestTurnStore(t, func(t *testing.T) storetest.TurnHarness {
		s := scheduler.NewMemTurns()
		return storetest.TurnHarness{Store: s, CurrentTurn: func(_ *testing.T, id string) string { return s.CurrentTurn(id) }}
	})
}
