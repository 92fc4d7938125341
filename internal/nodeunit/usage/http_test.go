package usage

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/claim"
)

func TestHandler(t *testing.T) {
	t.Parallel()
	h := Handler(func() claim.Usage { return claim.Usage{CPUPercent: 12.5, MemoryMB: 300} })
	tests := []struct {
		method, path string
		wantStatus   int
		wantBody     string
	}{
		{"GET", Path, 200, `{"cpu_percent":12.5,"memory_mb":300}` + "\n"},
		{"POST", Path, 200, `{"cpu_percent":12.5,"memory_mb":300}` + "\n"},
		{"DELETE", Path, 405, "method not allowed\n"},
		{"GET", "/other", 404, "404 page not found\n"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, strings.NewReader("{}")))
			if rec.Code != tt.wantStatus {
				t.Errorf("status = %d, want %d", rec.Code, tt.wantStatus)
			}
			if got := rec.Body.String(); got != tt.wantBody {
				t.Errorf("body = %q, want %q", got, tt.wantBody)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    claim.Usage
		wantErr string
	}{
		{in: `{"cpu_percent": 3.5, "memory_mb": 41.25}`, want: claim.Usage{CPUPercent: 3.5, MemoryMB: 41.25}},
		{in: `{"cpu_percent": 0, "memory_mb": 0, "extra": true}`, want: claim.Usage{}},
		{in: `{"memory_mb": 1}`, wantErr: "cpu_percent is missing"},
		{in: `{"cpu_percent": 1}`, wantErr: "memory_mb is missing"},
		{in: `{"cpu_percent": -1, "memory_mb": 1}`, wantErr: "cpu_percent is -1"},
		{in: `{"cpu_percent": "1", "memory_mb": 1}`, wantErr: "cannot unmarshal"},
		{in: `{"cpu_percent": 1, "memory_mb": 1} {}`, wantErr: "data after"},
		{in: ``, wantErr: "EOF"},
		{in: `[]`, wantErr: "cannot unmarshal"},
	}
	for _, tt := range tests {
		got, err := Decode([]byte(tt.in))
		if tt.wantErr != "" {
			if !errors.Is(err, ErrBadResponse) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Decode(%q) error = %v, want ErrBadResponse containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Decode(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Decode(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"cpu_percent": 3.5, "memory_mb": 41.25}`, `{}`, `{"cpu_percent": 1e400, "memory_mb": 1}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := Decode(b)
		if err == nil && (u.CPUPercent < 0 || u.MemoryMB < 0) {
			t.Errorf("Decode(%q) = %+v without error", b, u)
		}
	})
}

func TestProbe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  int
		body    string
		want    claim.Usage
		wantErr string
	}{
		{name: "ok", status: 200, body: `{"cpu_percent": 7, "memory_mb": 512}`, want: claim.Usage{CPUPercent: 7, MemoryMB: 512}},
		{name: "server error", status: 500, body: "boom", wantErr: "500 Internal Server Error: boom"},
		{name: "not found", status: 404, body: "", wantErr: "404 Not Found"},
		{name: "bad body", status: 200, body: `{"cpu_percent": 7}`, wantErr: "memory_mb is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotMethod, gotPath string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotMethod, gotPath = r.Method, r.URL.Path
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			p := &Probe{Client: srv.Client()}
			got, err := p.Usage(context.Background(), claim.NodeUnit{Address: "n1", UsageEndpoint: srv.URL + Path})
			if gotMethod != "GET" || gotPath != Path {
				t.Errorf("request = %s %s, want GET %s", gotMethod, gotPath, Path)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), `"n1"`) {
					t.Fatalf("error = %v, want one naming n1 and containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Usage: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestProbeAgainstHandler(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(Handler(func() claim.Usage { return claim.Usage{CPUPercent: 1.5, MemoryMB: 2048} }))
	defer srv.Close()
	got, err := (&Probe{}).Usage(context.Background(), claim.NodeUnit{Address: "n", UsageEndpoint: srv.URL + Path})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(claim.Usage{CPUPercent: 1.5, MemoryMB: 2048}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestProbeContextEnds(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }()
	_, err := (&Probe{}).Usage(ctx, claim.NodeUnit{Address: "slow", UsageEndpoint: srv.URL + Path})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
}

func TestProbeNoEndpoint(t *testing.T) {
	t.Parallel()
	_, err := (&Probe{}).Usage(context.Background(), claim.NodeUnit{Address: "n9"})
	if err == nil || !strings.Contains(err.Error(), `"n9" has no usage endpoint`) {
		t.Errorf("error = %v, want one saying n9 has no usage endpoint", err)
	}
}
