package cron_test

import (
	"testing"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/store/jsonstore"
	"github.com/ksana-dev/ksana/store/storetest"
)

func TestTmpJSONStoreConformance(t *testing.T) {
	storetest.CronStore(t, func(t *testing.T) cron.Store {
		s, err := jsonstore.New(t.TempDir(), jsonstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
