package scheduler_test

import (
	"testing"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
)

func TestMemReservations(t *testing.T) {
	storetest.TestReservationStore(t, func(t *testing.T) storetest.ReservationHarness {
		return storetest.ReservationHarness{Store: scheduler.NewMemReservations(scheduler.MemReservationsConfig{}), Synctest: true}
	})
}
