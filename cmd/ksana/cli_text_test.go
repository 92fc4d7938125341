package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTermWriter: what a terminal acts on is escaped, in text and in JSON,
// whatever the writes cut; the rest is kept as it is, and escaped JSON
// decodes to the same values.
func TestTermWriter(t *testing.T) {
	for _, tc := range []struct {
		in, text, json string
	}{
		{"plain: é ü 日本\ttab\n", "plain: é ü 日本\ttab\n", "plain: é ü 日本\ttab\n"},
		{"\x1b]0;PWNED\a\x1b[2J", `\x1b]0;PWNED\x07\x1b[2J`, `\u001b]0;PWNED\u0007\u001b[2J`},
		{"cr\rdel\x7fnul\x00", `cr\x0ddel\x7fnul\x00`, `cr\u000ddel\u007fnul\u0000`},
		{"c1 \u009b2J \u0085", `c1 \u009b2J \u0085`, `c1 \u009b2J \u0085`},
		{"bidi \u202egnp.exe\u202c \u2066x\u2069 \u200f\u061c", `bidi \u202egnp.exe\u202c \u2066x\u2069 \u200f\u061c`, `bidi \u202egnp.exe\u202c \u2066x\u2069 \u200f\u061c`},
		{"not utf-8 \xff\x9b end", `not utf-8 \xff\x9b end`, `not utf-8 \ufffd\ufffd end`},
		{"cut at the end \xe6\x97", `cut at the end \xe6\x97`, `cut at the end \ufffd\ufffd`},
	} {
		for _, js := range []bool{false, true} {
			want := tc.text
			if js {
				want = tc.json
			}
			// Whole, and a byte a write.
			for _, step := range []int{len(tc.in), 1} {
				var b strings.Builder
				w := &termWriter{w: &b, json: js}
				for i := 0; i < len(tc.in); i += step {
					p := tc.in[i:min(i+step, len(tc.in))]
					if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
						t.Fatalf("Write(%q) = %d, %v", p, n, err)
					}
				}
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				if got := b.String(); got != want {
					t.Errorf("json %v, writes of %d bytes: %q gives %q, want %q", js, step, tc.in, got, want)
				}
			}
		}
	}
	// encoding/json escapes C0 but not DEL, C1 nor the bidi controls; the
	// writer does, and the JSON decodes to the same string.
	s := "name \x1b]0;PWNED\a \x7f \u009b \u202e end"
	raw, _ := json.Marshal(map[string]string{"name": s})
	var b strings.Builder
	w := &termWriter{w: &b, json: true}
	w.Write(raw)
	w.Flush()
	for _, c := range []string{"\x1b", "\x7f", "\u009b", "\u202e"} {
		if strings.Contains(b.String(), c) {
			t.Errorf("JSON output %q holds %q", b.String(), c)
		}
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(b.String()), &got); err != nil || got["name"] != s {
		t.Errorf("escaped JSON %s decodes to %q, %v; want %q", b.String(), got["name"], err, s)
	}
}
