package redisstore

import (
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

// noServer is a client that no test reaches: validation runs before any
// command, so the constructors are checked without a server.
type noServer struct{ rueidis.Client }

// TestNewBadConfig: each constructor refuses a bad Config with an error
// that names the bad field, and refuses a nil client.
func TestNewBadConfig(t *testing.T) {
	c := noServer{}
	tests := []struct {
		name string
		new  func(rueidis.Client) error
		want string // in the error
	}{
		{"Jobs negative MaxAttempts", func(c rueidis.Client) error { _, err := NewJobs(c, JobsConfig{MaxAttempts: -1}); return err }, "JobsConfig.MaxAttempts"},
		{"Jobs negative TTL", func(c rueidis.Client) error { _, err := NewJobs(c, JobsConfig{TTL: -time.Second}); return err }, "JobsConfig.TTL"},
		{"Jobs sub-millisecond TTL", func(c rueidis.Client) error { _, err := NewJobs(c, JobsConfig{TTL: time.Microsecond}); return err }, "JobsConfig.TTL"},
		{"Turns negative TTL", func(c rueidis.Client) error { _, err := NewTurns(c, TurnsConfig{TTL: -time.Second}); return err }, "TurnsConfig.TTL"},
		{"Turns sub-millisecond TTL", func(c rueidis.Client) error { _, err := NewTurns(c, TurnsConfig{TTL: time.Microsecond}); return err }, "TurnsConfig.TTL"},
		{"Snapshots negative Batch", func(c rueidis.Client) error { _, err := NewNodeSnapshots(c, SnapshotsConfig{Batch: -1}); return err }, "SnapshotsConfig.Batch"},
		{"Storm negative window", func(c rueidis.Client) error {
			_, err := NewStorm(c, StormConfig{Windows: scheduler.StormWindows{Cooldown: -time.Second}})
			return err
		}, "StormConfig.Windows"},
		{"Streams negative MaxLen", func(c rueidis.Client) error { _, err := NewStreams(c, StreamsConfig{MaxLen: -1}); return err }, "StreamsConfig.MaxLen"},
		{"Streams negative DLQMaxLen", func(c rueidis.Client) error { _, err := NewStreams(c, StreamsConfig{DLQMaxLen: -1}); return err }, "StreamsConfig.DLQMaxLen"},
	}
	for _, tt := range tests {
		err := tt.new(c)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error = %v, want one naming %s", tt.name, err, tt.want)
		}
	}

	nilClient := map[string]func() error{
		"NewJobs":          func() error { _, err := NewJobs(nil, JobsConfig{}); return err },
		"NewTurns":         func() error { _, err := NewTurns(nil, TurnsConfig{}); return err },
		"NewDue":           func() error { _, err := NewDue(nil, DueConfig{}); return err },
		"NewOwners":        func() error { _, err := NewOwners(nil, OwnersConfig{}); return err },
		"NewPresence":      func() error { _, err := NewPresence(nil, PresenceConfig{}); return err },
		"NewReservations":  func() error { _, err := NewReservations(nil, ReservationsConfig{}); return err },
		"NewNodeSnapshots": func() error { _, err := NewNodeSnapshots(nil, SnapshotsConfig{}); return err },
		"NewStorm":         func() error { _, err := NewStorm(nil, StormConfig{}); return err },
		"NewStreams":       func() error { _, err := NewStreams(nil, StreamsConfig{}); return err },
	}
	for name, f := range nilClient {
		if err := f(); err == nil || !strings.Contains(err.Error(), "nil client") {
			t.Errorf("%s(nil client): error = %v, want one naming the nil client", name, err)
		}
	}

	// A good Config passes: the checks above are not refusing everything.
	if _, err := NewJobs(c, JobsConfig{MaxAttempts: 3, TTL: time.Minute}); err != nil {
		t.Errorf("NewJobs(good config): %v", err)
	}
}
