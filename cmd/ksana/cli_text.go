package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"unicode/utf8"
)

// termWriter is the one way out of the commands: everything they print,
// on stdout and stderr, goes through one. It escapes what a terminal
// would act on rather than show: C0 control characters but newline and
// tab, DEL, C1 control characters, invalid UTF-8 and the Unicode
// bidirectional controls, which a job name, an error or a callback's
// reply may hold ("\x1b]0;PWNED\a" retitles a terminal). In text they
// become \x1b, \u009b, \u202e; in JSON (-o json), \u001b and the like,
// which decode to the same string, so the output stays exact JSON.
type termWriter struct {
	w    io.Writer
	json bool   // the output is JSON: escape as JSON does
	rest []byte // the start of a UTF-8 sequence cut by the last Write
	buf  []byte
}

// Write escapes p and writes it; it keeps a UTF-8 sequence cut at the end
// of p until the next Write (or Flush).
func (t *termWriter) Write(p []byte) (int, error) {
	data := p
	if len(t.rest) > 0 {
		data = append(t.rest, p...)
		t.rest = nil
	}
	out := t.buf[:0]
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 && !utf8.FullRune(data[i:]) {
			t.rest = append(t.rest, data[i:]...)
			break
		}
		out = t.escape(out, data[i:i+size], r, size)
		i += size
	}
	t.buf = out
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes, escaped, what a cut UTF-8 sequence left.
func (t *termWriter) Flush() error {
	rest := t.rest
	t.rest = nil
	var out []byte
	for _, b := range rest {
		out = t.escape(out, []byte{b}, utf8.RuneError, 1)
	}
	_, err := t.w.Write(out)
	return err
}

// escape appends to out the rune r read from raw (size bytes), escaped if
// a terminal would act on it.
func (t *termWriter) escape(out, raw []byte, r rune, size int) []byte {
	switch {
	case r == utf8.RuneError && size == 1: // a byte that is not UTF-8
		if t.json {
			return append(out, `\ufffd`...)
		}
		return fmt.Appendf(out, `\x%02x`, raw[0])
	case r == '\n' || r == '\t':
		return append(out, raw...)
	case r < 0x20 || r == 0x7f:
		if t.json {
			return fmt.Appendf(out, `\u%04x`, r)
		}
		return fmt.Appendf(out, `\x%02x`, r)
	case r >= 0x80 && r <= 0x9f, isBidiControl(r):
		return fmt.Appendf(out, `\u%04x`, r)
	}
	return append(out, raw...)
}

// isBidiControl reports whether r is a Unicode bidirectional formatting
// character, which can make text show in another order than it is.
func isBidiControl(r rune) bool {
	switch {
	case r == 0x061c, r == 0x200e, r == 0x200f: // ALM, LRM, RLM
		return true
	case r >= 0x202a && r <= 0x202e: // LRE, RLE, PDF, LRO, RLO
		return true
	case r >= 0x2066 && r <= 0x2069: // LRI, RLI, FSI, PDI
		return true
	}
	return false
}

// table is a table of the commands' text output. It escapes its cells
// before it aligns them, so that an escaped cell keeps its column.
type table struct {
	tw  *tabwriter.Writer
	esc *termWriter
}

func (t *table) Write(p []byte) (int, error) { return t.esc.Write(p) }

// Flush writes the table.
func (t *table) Flush() error {
	if err := t.esc.Flush(); err != nil {
		return err
	}
	return t.tw.Flush()
}
