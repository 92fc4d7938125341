package promtext

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ContentType is the media type of the text format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// DefaultBuckets are upper bounds in seconds for latencies from 1ms to 60s.
var DefaultBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

type family interface {
	write(w *bufio.Writer)
}

// Registry holds metric families and serves them over HTTP.
type Registry struct {
	mu       sync.Mutex
	families []family
	names    map[string]bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{names: map[string]bool{}} }

func (r *Registry) add(name string, f family) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names[name] {
		panic("promtext: metric " + name + " registered twice")
	}
	if !validName(name) {
		panic("promtext: invalid metric name " + strconv.Quote(name))
	}
	r.names[name] = true
	r.families = append(r.families, f)
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}

// WriteTo writes every family in the text format.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	fams := slices.Clone(r.families)
	r.mu.Unlock()
	cw := &countWriter{w: w}
	bw := bufio.NewWriter(cw)
	for _, f := range fams {
		f.write(bw)
	}
	err := bw.Flush()
	return cw.n, err
}

// ServeHTTP writes the metrics as a scrape response.
func (r *Registry) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", ContentType)
	_, _ = r.WriteTo(w)
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// series is one label-value combination of a family.
type series struct {
	values []string
	v      float64
}

type vec struct {
	name, help, typ string
	labels          []string
	mu              sync.Mutex
	series          map[string]*series
}

func newVec(name, help, typ string, labels []string) *vec {
	return &vec{name: name, help: help, typ: typ, labels: labels, series: map[string]*series{}}
}

func (v *vec) get(values []string) *series {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("promtext: %s wants %d label values, got %d", v.name, len(v.labels), len(values)))
	}
	key := strings.Join(values, "\xff")
	s := v.series[key]
	if s == nil {
		s = &series{values: slices.Clone(values)}
		v.series[key] = s
	}
	return s
}

func (v *vec) write(w *bufio.Writer) {
	v.mu.Lock()
	all := make([]series, 0, len(v.series))
	for _, s := range v.series {
		all = append(all, *s)
	}
	v.mu.Unlock()
	slices.SortFunc(all, func(a, b series) int { return slices.Compare(a.values, b.values) })
	writeHeader(w, v.name, v.help, v.typ)
	for _, s := range all {
		writeSample(w, v.name, v.labels, s.values, "", "", s.v)
	}
}

// CounterVec is a counter family: values only go up.
type CounterVec struct{ v *vec }

// Counter registers a counter family with the given label names.
func (r *Registry) Counter(name, help string, labels ...string) *CounterVec {
	c := &CounterVec{newVec(name, help, "counter", labels)}
	r.add(name, c.v)
	return c
}

// Add adds delta (>= 0) to the series of the label values.
func (c *CounterVec) Add(delta float64, labelValues ...string) {
	if delta < 0 {
		panic("promtext: counter " + c.v.name + " decreased")
	}
	c.v.mu.Lock()
	c.v.get(labelValues).v += delta
	c.v.mu.Unlock()
}

// GaugeVec is a gauge family: values go up and down.
type GaugeVec struct{ v *vec }

// Gauge registers a gauge family with the given label names.
func (r *Registry) Gauge(name, help string, labels ...string) *GaugeVec {
	g := &GaugeVec{newVec(name, help, "gauge", labels)}
	r.add(name, g.v)
	return g
}

// Set sets the series of the label values to v.
func (g *GaugeVec) Set(v float64, labelValues ...string) {
	g.v.mu.Lock()
	g.v.get(labelValues).v = v
	g.v.mu.Unlock()
}

// Add adds delta to the series of the label values.
func (g *GaugeVec) Add(delta float64, labelValues ...string) {
	g.v.mu.Lock()
	g.v.get(labelValues).v += delta
	g.v.mu.Unlock()
}

type gaugeFunc struct {
	name, help string
	labels     []string
	collect    func(emit func(v float64, labelValues ...string))
}

// GaugeFunc registers a gauge family whose series collect computes at each
// scrape, calling emit once per series.
func (r *Registry) GaugeFunc(name, help string, labels []string, collect func(emit func(v float64, labelValues ...string))) {
	r.add(name, &gaugeFunc{name: name, help: help, labels: labels, collect: collect})
}

func (g *gaugeFunc) write(w *bufio.Writer) {
	v := newVec(g.name, g.help, "gauge", g.labels)
	g.collect(func(x float64, labelValues ...string) { v.get(labelValues).v = x })
	v.write(w)
}

// Histogram counts observations in cumulative buckets.
type Histogram struct {
	name, help string
	bounds     []float64
	mu         sync.Mutex
	counts     []uint64 // per bucket, not cumulative; last is +Inf
	sum        float64
	count      uint64
}

// Histogram registers a histogram with the given upper bounds (sorted
// ascending; +Inf is implied).
func (r *Registry) Histogram(name, help string, bounds []float64) *Histogram {
	if !slices.IsSorted(bounds) {
		panic("promtext: buckets of " + name + " are not sorted")
	}
	h := &Histogram{name: name, help: help, bounds: slices.Clone(bounds), counts: make([]uint64, len(bounds)+1)}
	r.add(name, h)
	return h
}

// Observe records one value.
func (h *Histogram) Observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v)
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.count++
	h.mu.Unlock()
}

func (h *Histogram) write(w *bufio.Writer) {
	h.mu.Lock()
	counts := slices.Clone(h.counts)
	sum, count := h.sum, h.count
	h.mu.Unlock()
	writeHeader(w, h.name, h.help, "histogram")
	var cum uint64
	for i, b := range h.bounds {
		cum += counts[i]
		writeSample(w, h.name+"_bucket", nil, nil, "le", formatFloat(b), float64(cum))
	}
	writeSample(w, h.name+"_bucket", nil, nil, "le", "+Inf", float64(count))
	writeSample(w, h.name+"_sum", nil, nil, "", "", sum)
	writeSample(w, h.name+"_count", nil, nil, "", "", float64(count))
}

func writeHeader(w *bufio.Writer, name, help, typ string) {
	w.WriteString("# HELP ")
	w.WriteString(name)
	w.WriteByte(' ')
	w.WriteString(strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(help))
	w.WriteString("\n# TYPE ")
	w.WriteString(name)
	w.WriteByte(' ')
	w.WriteString(typ)
	w.WriteByte('\n')
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)

func writeSample(w *bufio.Writer, name string, labels, values []string, extraLabel, extraValue string, v float64) {
	w.WriteString(name)
	if len(labels) > 0 || extraLabel != "" {
		w.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				w.WriteByte(',')
			}
			w.WriteString(l)
			w.WriteString(`="`)
			w.WriteString(labelEscaper.Replace(values[i]))
			w.WriteByte('"')
		}
		if extraLabel != "" {
			if len(labels) > 0 {
				w.WriteByte(',')
			}
			w.WriteString(extraLabel)
			w.WriteString(`="`)
			w.WriteString(extraValue)
			w.WriteByte('"')
		}
		w.WriteByte('}')
	}
	w.WriteByte(' ')
	w.WriteString(formatFloat(v))
	w.WriteByte('\n')
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
