package scheduler_test

import (
	"testing"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
)

func TestMemReservations(t *testing.T) {
	storetest.TestReservationStore(t, func(t *testing.T) storetest.ReservationHarness {
		clock := newFakeClock()
		return storetest.ReservationHarness{
			Store:  scheduler.NewMemReservations(scheduler.MemReservationsConfig{Now: clock.Now}),
			Elapse: func(d time.Duration) { clock.Advance(d) },
		}
	})
}
