package main

import (
	"context"
	"errors"
	"net"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/internal/nodeunit/proc"
)

func TestSpecOf(t *testing.T) {
	t.Parallel()
	d := claim.Deployment{ID: "d1", Command: "app", Args: []string{"-v"}, Env: map[string]string{"B": "2", "A": "1", "C": "x=y"}}
	want := proc.Spec{ID: "d1", Command: "app", Args: []string{"-v"}, Env: []string{"A=1", "B=2", "C=x=y"}}
	if diff := cmp.Diff(want, specOf(d)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestRunnerRefusals(t *testing.T) {
	t.Parallel()
	r, err := proc.New(proc.Config{LogDir: t.TempDir(), Trusted: regexp.MustCompile(`sleep`)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	pr := procRunner{r: r}
	tests := []struct {
		name string
		d    claim.Deployment
		want error
	}{
		{"untrusted", claim.Deployment{ID: "x", Command: "rm"}, proc.ErrUntrusted},
		{"no command", claim.Deployment{ID: "y"}, proc.ErrInvalidSpec},
	}
	for _, tt := range tests {
		err := pr.Start(context.Background(), tt.d)
		if !errors.Is(err, claim.ErrRefused) || !errors.Is(err, tt.want) {
			t.Errorf("%s: Start = %v, want claim.ErrRefused and %v", tt.name, err, tt.want)
		}
	}
	if got := pr.Running(); len(got) != 0 {
		t.Errorf("Running = %v, want none", got)
	}
}

func TestUsageURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7070}, "http://127.0.0.1:7070/NodeUnit/InspectResourceUsage"},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 80}, "http://[::1]:80/NodeUnit/InspectResourceUsage"},
	}
	for _, tt := range tests {
		if got := usageURL(tt.addr); got != tt.want {
			t.Errorf("usageURL(%v) = %q, want %q", tt.addr, got, tt.want)
		}
	}
	got := usageURL(&net.TCPAddr{IP: net.IPv4zero, Port: 9})
	if regexp.MustCompile(`^http://(0\.0\.0\.0|\[::\]):`).MatchString(got) {
		t.Errorf("usageURL of an unspecified address = %q, want a host name", got)
	}
}
