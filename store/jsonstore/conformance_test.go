package jsonstore_test

import (
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/store/jsonstore"
	"github.com/ksana-dev/ksana/store/storetest"
)

func TestCronStoreConformance(t *testing.T) {
	t.Parallel()
	storetest.TestCronStore(t, openStore)
}

func TestCronHandlers(t *testing.T) {
	t.Parallel()
	storetest.TestCronHandlers(t, openStore)
}

func openStore(t *testing.T) cron.Store {
	s, err := jsonstore.New(t.TempDir(), jsonstore.Config{FlushInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}
