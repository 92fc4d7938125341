package jsonstore

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCheckRunsCutsWholeLines checks the blocks of checkRuns against the
// file: their lines and the tail, put together, give back every byte from
// the offset read from; each line is whole, and read as lineHead and
// json.Valid read it alone. The files have lines across the blocks'
// edges, a line longer than a block, blank and bad lines, a last line
// cut short or none, and more blocks than checkRuns holds at once (their
// memory is recycled).
func TestCheckRunsCutsWholeLines(t *testing.T) {
	const runBlockSize = 64 << 10 // the store's blocks, smaller
	line := func(i int, pad int) string {
		return `{"prev":` + strconv.Itoa(i) + `,"run_id":"r","job_id":"job-` + strconv.Itoa(i%7) + `","x":"` + strings.Repeat("a", pad) + `"}` + "\n"
	}
	var many strings.Builder
	for i := 0; many.Len() < 2*runBlockSize+1000; i++ {
		many.WriteString(line(i, i%300))
	}
	// More blocks than are ever in flight: later blocks are read into the
	// memory of earlier ones given back.
	var lots strings.Builder
	for i := 0; lots.Len() < 20*runBlockSize; i++ {
		lots.WriteString(line(i, i%1000))
	}
	long := line(1, runBlockSize+10)
	cases := map[string]string{
		"empty":               "",
		"one line":            line(0, 0),
		"cut short":           line(0, 0) + `{"prev":0,"run_id":"r","jo`,
		"only cut short":      `{"prev":0`,
		"blank and bad lines": line(0, 0) + "\n  \n" + "{not json}\n" + `{"prev":1,"job_id":"a"` + "\n" + line(2, 3),
		"many blocks":         many.String(),
		"many, cut short":     many.String() + `{"prev":9`,
		"lots, cut short":     lots.String() + `{"prev":9`,
		"longer than a block": line(0, 0) + long + line(2, 0),
		"long and cut short":  long + strings.Repeat("b", runBlockSize+5),
		"block edge":          strings.Repeat(line(3, 0), runBlockSize/len(line(3, 0))),
	}
	for name, content := range cases {
		for _, from := range []int{0, len(content) / 3} {
			if from > 0 {
				// Start at a line's start, as runs.idx gives it.
				from = strings.LastIndexByte(content[:from], '\n') + 1
			}
			path := filepath.Join(t.TempDir(), "runs.jsonl")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			blocks, recycle, stop := checkRuns(f, int64(from), int64(len(content)), runBlockSize, nil)
			var got bytes.Buffer
			var tail []byte
			for b := range blocks {
				<-b.done
				if b.err != nil {
					t.Fatalf("%s: %v", name, b.err)
				}
				if tail != nil {
					t.Fatalf("%s: a block after the tail", name)
				}
				for _, l := range b.lines {
					if len(l.line) == 0 || l.line[len(l.line)-1] != '\n' || bytes.IndexByte(l.line[:len(l.line)-1], '\n') >= 0 {
						t.Fatalf("%s: not one whole line: %q", name, l.line)
					}
					got.Write(l.line)
					body := bytes.TrimSpace(l.line)
					p, id, ok := lineHead(body)
					ok = ok && json.Valid(body)
					if ok != l.head || ok && (p != l.prev || string(id) != string(l.id)) {
						t.Fatalf("%s: line %q read as head %v prev %d id %q", name, l.line, l.head, l.prev, l.id)
					}
				}
				tail = b.tail
				recycle(b) // a later block reads into its memory
			}
			stop()
			f.Close()
			if tail == nil {
				t.Fatalf("%s: no tail block", name)
			}
			got.Write(tail)
			if got.String() != content[from:] {
				t.Fatalf("%s from %d: the blocks give %d bytes, want the file's %d", name, from, got.Len(), len(content)-from)
			}
			if want := content[strings.LastIndexByte(content, '\n')+1:]; string(tail) != want && len(content)-from > 0 {
				t.Fatalf("%s: tail %q, want %q", name, tail, want)
			}
		}
	}
}

// TestCheckRunsStops checks that stop, when the reader of the blocks
// leaves after the first, leaves none of checkRuns's goroutines behind.
func TestCheckRunsStops(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 12*runBlockSize; i++ {
		b.WriteString(`{"prev":0,"run_id":"r","job_id":"j","pad":"` + strings.Repeat("x", 200) + "\"}\n")
	}
	path := filepath.Join(t.TempDir(), "runs.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := runtime.NumGoroutine()
	blocks, _, stop := checkRuns(f, 0, int64(b.Len()), runBlockSize, nil)
	first := <-blocks
	<-first.done
	stop()
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after stop, %d before checkRuns", runtime.NumGoroutine(), before)
		}
		time.Sleep(time.Millisecond)
	}
}
