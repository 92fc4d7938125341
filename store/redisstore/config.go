package redisstore

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/ksana-dev/ksana/scheduler"
)

// LoadConfig reads the [scheduler.phase2] table of the config.toml at path
// (see [ParseConfig]).
func LoadConfig(path string) (scheduler.Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return scheduler.Config{}, fmt.Errorf("redisstore: load config: %w", err)
	}
	cfg, err := ParseConfig(b)
	if err != nil {
		return scheduler.Config{}, fmt.Errorf("redisstore: %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes the [scheduler.phase2], [scheduler.phase2.redis],
// [scheduler.phase2.node_snapshot] and [scheduler.phase2.storm] tables of a
// config.toml (other tables are left to their readers), applies the
// defaults ([scheduler.Config.WithDefaults], which also resolves an "auto"
// instance id) and validates the result. A key under scheduler.phase2 that
// the configuration does not know, a value of the wrong type and an invalid
// value are errors naming the field, such as
// "scheduler.phase2.redis.mode: unknown mode \"x\" (single|cluster)".
func ParseConfig(data []byte) (scheduler.Config, error) {
	var doc struct {
		Scheduler struct {
			Phase2 scheduler.Config `toml:"phase2"`
		} `toml:"scheduler"`
	}
	md, err := toml.Decode(string(data), &doc)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return scheduler.Config{}, fmt.Errorf("config.toml line %d: %s: %w", pe.Position.Line, pe.Message, scheduler.ErrInvalidConfig)
		}
		// Type mismatches name the key: "toml: line 3 (last key "scheduler.phase2.stream_count"): ...".
		return scheduler.Config{}, fmt.Errorf("config.toml: %v: %w", err, scheduler.ErrInvalidConfig)
	}
	var unknown []string
	for _, k := range md.Undecoded() {
		if s := k.String(); strings.HasPrefix(s, scheduler.ConfigPath+".") {
			unknown = append(unknown, s)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return scheduler.Config{}, &scheduler.ConfigError{Field: unknown[0], Reason: "unknown field"}
	}
	cfg := doc.Scheduler.Phase2.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return scheduler.Config{}, err
	}
	return cfg, nil
}
