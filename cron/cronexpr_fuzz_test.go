package cron

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseCron checks that ParseCron never panics, that its errors are
// *ParseError values, and that whatever parses survives parse -> String ->
// parse with the same fields and the same run times, which are strictly
// increasing.
func FuzzParseCron(f *testing.F) {
	for _, s := range cronSeeds {
		f.Add(s)
	}
	for _, s := range []string{
		"0 0 1W,LW,L-0 * ?", "0 0 ? * 0L,6#5", "1-59/59 0-23/23 31 1,3,5,7,8,10,12 *", "@every 1ns",
		"TZ=Europe/Berlin @annually", "cron_tz=UTC 0 0 * * *", "0 0 * * 07", "00 00 001 * *", "* * * * ? ?",
		"L * * * *", "0 0 L-0,L-30 * *", "0 0 29 2 MON#5", "0 0 LW 2 *", "0 0 1-31/31 * *", "\t@midnight\n",
		"00 0 1 1 \xe6\xe6\xe6#000", "0 0 * * \u0131#1", "0 0 1 \u212aAN *",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		c, err := ParseCron(spec)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), "cron: ") {
				t.Fatalf("ParseCron(%q) error %v (%T): want a *ParseError starting with cron:", spec, err, err)
			}
			return
		}
		cronRoundTrip(t, c)
	})
}
