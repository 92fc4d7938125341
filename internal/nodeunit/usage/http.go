package usage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/claim"
)

// Path is where [Handler] serves NodeUnit/InspectResourceUsage.
const Path = "/NodeUnit/InspectResourceUsage"

// ErrBadResponse: a usage endpoint answered with something that is not a
// usage reading.
var ErrBadResponse = errors.New("usage: bad response")

// response is the JSON body of NodeUnit/InspectResourceUsage.
type response struct {
	CPUPercent *float64 `json:"cpu_percent"`
	MemoryMB   *float64 `json:"memory_mb"`
}

// Handler serves usage() as JSON at [Path] to GET, HEAD and POST requests;
// other methods get 405, other paths 404.
func Handler(usage func() claim.Usage) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(Path, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodPost:
		default:
			w.Header().Set("Allow", "GET, HEAD, POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		u := usage()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(response{CPUPercent: &u.CPUPercent, MemoryMB: &u.MemoryMB})
	})
	return mux
}

// Decode parses a NodeUnit/InspectResourceUsage body. Both fields are
// required and must be finite numbers >= 0; the error names the field.
func Decode(body []byte) (claim.Usage, error) {
	var r response
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&r); err != nil {
		return claim.Usage{}, fmt.Errorf("%w: %v", ErrBadResponse, err)
	}
	if dec.More() {
		return claim.Usage{}, fmt.Errorf("%w: data after the JSON object", ErrBadResponse)
	}
	check := func(name string, v *float64) (float64, error) {
		switch {
		case v == nil:
			return 0, fmt.Errorf("%w: %s is missing", ErrBadResponse, name)
		case math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0:
			return 0, fmt.Errorf("%w: %s is %v, want a number >= 0", ErrBadResponse, name, *v)
		}
		return *v, nil
	}
	var u claim.Usage
	var err error
	if u.CPUPercent, err = check("cpu_percent", r.CPUPercent); err != nil {
		return claim.Usage{}, err
	}
	if u.MemoryMB, err = check("memory_mb", r.MemoryMB); err != nil {
		return claim.Usage{}, err
	}
	return u, nil
}

// DefaultProbeTimeout bounds a probe whose context has no deadline.
const DefaultProbeTimeout = 5 * time.Second

// maxBody caps the response body a Probe reads.
const maxBody = 64 << 10

// Probe is a [claim.UsageProbe] over HTTP. The zero value is ready to use.
type Probe struct {
	// Client sends the requests. Default http.DefaultClient.
	Client *http.Client
}

var _ claim.UsageProbe = (*Probe)(nil)

// Usage GETs n.UsageEndpoint under ctx (bounded by [DefaultProbeTimeout]
// when ctx has no deadline) and decodes the reading. A node without an
// endpoint, a transport error, a status other than 200 and a bad body are
// errors.
func (p *Probe) Usage(ctx context.Context, n claim.NodeUnit) (claim.Usage, error) {
	if n.UsageEndpoint == "" {
		return claim.Usage{}, fmt.Errorf("usage: node-unit %q has no usage endpoint", n.Address)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultProbeTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.UsageEndpoint, nil)
	if err != nil {
		return claim.Usage{}, fmt.Errorf("usage: node-unit %q: %w", n.Address, err)
	}
	req.Header.Set("Accept", "application/json")
	c := p.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return claim.Usage{}, fmt.Errorf("usage: node-unit %q: %w", n.Address, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return claim.Usage{}, fmt.Errorf("usage: node-unit %q: read body: %w", n.Address, err)
	}
	if resp.StatusCode != http.StatusOK {
		return claim.Usage{}, fmt.Errorf("%w: node-unit %q: %s: %s", ErrBadResponse, n.Address, resp.Status, strings.TrimSpace(string(body[:min(len(body), 200)])))
	}
	u, err := Decode(body)
	if err != nil {
		return claim.Usage{}, fmt.Errorf("node-unit %q: %w", n.Address, err)
	}
	return u, nil
}
