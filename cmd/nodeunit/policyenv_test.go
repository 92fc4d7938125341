package main

// The claim loop's settings as the environment gives them: the policy and
// its weights, the interval.

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/claim"
)

func TestParseInterval(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"", 5 * time.Second, false},
		{"5000", 5 * time.Second, false},
		{" 250 ", 250 * time.Millisecond, false},
		{"0", 0, true},
		{"-5", 0, true},
		{"5s", 0, true},
		{"1.5", 0, true},
		{"86400001", 0, true},
	}
	for _, tt := range tests {
		got, err := parseInterval(tt.in)
		if tt.wantErr {
			var ce *EnvError
			if !errors.As(err, &ce) || ce.Name != "NODE_UNIT_SCHEDULER_INTERVAL_MS" {
				t.Errorf("parseInterval(%q) error = %v, want one naming NODE_UNIT_SCHEDULER_INTERVAL_MS", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseInterval(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseWeights(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cpu, mem string
		want     claim.Weights
		wantErr  string
	}{
		{"", "", claim.Weights{CPU: 0.5, Memory: 0.5}, ""},
		{"0.7", "0.3", claim.Weights{CPU: 0.7, Memory: 0.3}, ""},
		{"1", "", claim.Weights{CPU: 1, Memory: 0.5}, ""},
		{"0", "0", claim.Weights{}, ""},
		{"abc", "", claim.Weights{}, "NODE_UNIT_CPU_WEIGHT"},
		{"", "NaN", claim.Weights{}, "NODE_UNIT_MEMORY_WEIGHT"},
		{"", "Inf", claim.Weights{}, "NODE_UNIT_MEMORY_WEIGHT"},
		{"-0.1", "", claim.Weights{}, "NODE_UNIT_CPU_WEIGHT"},
	}
	for _, tt := range tests {
		got, err := parseWeights(tt.cpu, tt.mem)
		if tt.wantErr != "" {
			var ce *EnvError
			if !errors.As(err, &ce) || ce.Name != tt.wantErr {
				t.Errorf("parseWeights(%q, %q) error = %v, want one naming %s", tt.cpu, tt.mem, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseWeights(%q, %q) = %+v, %v; want %+v", tt.cpu, tt.mem, got, err, tt.want)
		}
	}
}

func FuzzParseWeights(f *testing.F) {
	for _, s := range []string{"", "0.5", "1e3", "-1", "NaN", "+Inf", "0x1p-2", "1_0", " 2 "} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, cpu, mem string) {
		w, err := parseWeights(cpu, mem)
		if err != nil {
			var ce *EnvError
			if !errors.As(err, &ce) || (ce.Name != envCPUWeight && ce.Name != envMemoryWeight) {
				t.Fatalf("parseWeights(%q, %q) error %v names no variable", cpu, mem, err)
			}
			return
		}
		if !(w.CPU >= 0) || !(w.Memory >= 0) || w.CPU > 1e308 || w.Memory > 1e308 {
			t.Fatalf("parseWeights(%q, %q) = %+v, want finite weights >= 0", cpu, mem, w)
		}
	})
}

func FuzzParseInterval(f *testing.F) {
	for _, s := range []string{"", "5000", "0", "-1", "1e3", "9999999999999999999", " 7 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseInterval(s)
		if err != nil {
			var ce *EnvError
			if !errors.As(err, &ce) || ce.Name != envSchedulerInterval {
				t.Fatalf("parseInterval(%q) error %v does not name the variable", s, err)
			}
			return
		}
		if d <= 0 || d > 24*time.Hour || d%time.Millisecond != 0 {
			t.Fatalf("parseInterval(%q) = %v, want whole milliseconds in (0, 24h]", s, d)
		}
	})
}

func TestUsesEnvironmentVariableToSelectPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env     map[string]string
		want    string
		wantErr string
	}{
		{map[string]string{}, "deployment_count", ""},
		{map[string]string{"NODE_UNIT_CLAIM_POLICY": "resource_usage"}, "resource_usage", ""},
		{map[string]string{"NODE_UNIT_CLAIM_POLICY": "Resource_Usage"}, "resource_usage", ""},
		{map[string]string{"NODE_UNIT_CLAIM_POLICY": "deployment_count"}, "deployment_count", ""},
		{map[string]string{"NODE_UNIT_CLAIM_POLICY": "NONE"}, "none", ""},
		{map[string]string{"NODE_UNIT_CLAIM_POLICY": " none "}, "none", ""},
		{map[string]string{"NODE_UNIT_CLAIM_POLICY": "least_loaded"}, "", "NODE_UNIT_CLAIM_POLICY"},
		{map[string]string{"NODE_UNIT_CLAIM_POLICY": "resource_usage", "NODE_UNIT_CPU_WEIGHT": "x"}, "", "NODE_UNIT_CPU_WEIGHT"},
		{map[string]string{"NODE_UNIT_MEMORY_WEIGHT": "-1"}, "", "NODE_UNIT_MEMORY_WEIGHT"},
	}
	for _, tt := range tests {
		p, err := policyFromEnv(func(k string) string { return tt.env[k] })
		if tt.wantErr != "" {
			var ce *EnvError
			if !errors.As(err, &ce) || ce.Name != tt.wantErr {
				t.Errorf("policyFromEnv(%v) error = %v, want an *EnvError naming %s", tt.env, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("policyFromEnv(%v): %v", tt.env, err)
			continue
		}
		if p.Name() != tt.want {
			t.Errorf("policyFromEnv(%v) = %s, want %s", tt.env, p.Name(), tt.want)
		}
	}
	// The weights reach the resource_usage policy.
	p, err := policyFromEnv(func(k string) string {
		return map[string]string{"NODE_UNIT_CLAIM_POLICY": "resource_usage", "NODE_UNIT_CPU_WEIGHT": "1", "NODE_UNIT_MEMORY_WEIGHT": "0"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	got := claim.Snapshots(p, []string{"a"}, claim.MetricContext{ResourceUsage: map[string]claim.Usage{"a": {CPUPercent: 7, MemoryMB: 1 << 20}}})
	if want := (map[string][]claim.MetricSnapshot{"a": {{Key: "resource_usage", Value: 7}}}); !cmp.Equal(want, got) {
		t.Errorf("weighted snapshot = %v, want %v", got, want)
	}
}
