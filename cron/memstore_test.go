package cron_test

import (
	"testing"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/store/storetest"
)

func TestMemStoreConformance(t *testing.T) {
	storetest.CronStore(t, func(t *testing.T) cron.Store { return cron.NewMemStore() })
}

func TestMemStoreSmallLimit(t *testing.T) {
	storetest.CronStore(t, func(t *testing.T) cron.Store { return &cron.MemStore{RunLimit: 3} })
}
