package cron

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the DST tests do not depend on the machine's zoneinfo

	"github.com/google/go-cmp/cmp"
)

func schedTime(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("bad time %q: %v", s, err)
	}
	return v
}

func schedLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return l
}

// nextN returns the n run times after from, as RFC3339 strings in the
// schedule's own zone offset.
func schedNextN(s Schedule, from time.Time, n int) []string {
	var got []string
	t := from
	for range n {
		t = s.Next(t)
		if t.IsZero() {
			got = append(got, "zero")
			break
		}
		got = append(got, t.Format(time.RFC3339))
	}
	return got
}

// diffTimes compares RFC3339 strings, so both the instant and the zone
// offset of each run must match.
func schedDiff(got, want []string) string {
	return cmp.Diff(want, got)
}

func TestCronNext(t *testing.T) {
	tests := []struct {
		spec string
		loc  string // the location it is read in; "" for none
		from string
		want []string
	}{
		{"0 0 * * *", "", "2026-01-01T10:00:00Z", []string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"}},
		{"*/15 * * * *", "", "2026-01-01T10:07:30Z", []string{"2026-01-01T10:15:00Z", "2026-01-01T10:30:00Z", "2026-01-01T10:45:00Z", "2026-01-01T11:00:00Z"}},
		{"*/15 * * * *", "", "2026-01-01T10:15:00Z", []string{"2026-01-01T10:30:00Z"}},                             // strictly after
		{"0 0 * * *", "", "2026-01-01T23:59:59.999999999Z", []string{"2026-01-02T00:00:00Z"}},                      // sub-second after
		{"30 9 * * MON-FRI", "", "2026-01-02T10:00:00Z", []string{"2026-01-05T09:30:00Z", "2026-01-06T09:30:00Z"}}, // Fri -> Mon
		{"0 12 1-30/2 * *", "", "2026-01-01T13:00:00Z", []string{"2026-01-03T12:00:00Z", "2026-01-05T12:00:00Z"}},  // range with step
		{"5/15 * * * *", "", "2026-01-01T10:00:00Z", []string{"2026-01-01T10:05:00Z", "2026-01-01T10:20:00Z", "2026-01-01T10:35:00Z", "2026-01-01T10:50:00Z", "2026-01-01T11:05:00Z"}},
		{"0 8,12,18 * * *", "", "2026-01-01T12:00:00Z", []string{"2026-01-01T18:00:00Z", "2026-01-02T08:00:00Z", "2026-01-02T12:00:00Z"}},
		{"0 0 1 jan,Jul *", "", "2026-01-01T00:00:00Z", []string{"2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
		{"0 0 * * sat-SUN", "", "2026-01-01T00:00:00Z", []string{"2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-10T00:00:00Z"}},
		{"0 0 * * 7", "", "2026-01-01T00:00:00Z", []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"0 0 * * 5-7", "", "2026-01-01T00:00:00Z", []string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-09T00:00:00Z"}},
		{"0 0 * * MON-FRI/2", "", "2026-01-01T00:00:00Z", []string{"2026-01-02T00:00:00Z", "2026-01-05T00:00:00Z", "2026-01-07T00:00:00Z"}},
		// L, L-n, LW, W.
		{"0 0 L * *", "", "2026-01-15T00:00:00Z", []string{"2026-01-31T00:00:00Z", "2026-02-28T00:00:00Z", "2026-03-31T00:00:00Z", "2026-04-30T00:00:00Z"}},
		{"0 0 L-3 * *", "", "2026-01-15T00:00:00Z", []string{"2026-01-28T00:00:00Z", "2026-02-25T00:00:00Z", "2026-03-28T00:00:00Z", "2026-04-27T00:00:00Z"}},
		{"0 0 L 2 *", "", "2027-03-01T00:00:00Z", []string{"2028-02-29T00:00:00Z", "2029-02-28T00:00:00Z"}},
		{"0 0 15W * *", "", "2026-01-01T00:00:00Z", []string{"2026-01-15T00:00:00Z", "2026-02-16T00:00:00Z", "2026-03-16T00:00:00Z", "2026-04-15T00:00:00Z"}},
		{"0 0 15W 8 *", "", "2026-01-01T00:00:00Z", []string{"2026-08-14T00:00:00Z"}}, // Saturday 15th -> Friday
		{"0 0 1W * *", "", "2026-07-15T00:00:00Z", []string{"2026-08-03T00:00:00Z", "2026-09-01T00:00:00Z", "2026-10-01T00:00:00Z", "2026-11-02T00:00:00Z"}},
		{"0 0 31W * *", "", "2026-01-01T00:00:00Z", []string{"2026-01-30T00:00:00Z", "2026-03-31T00:00:00Z", "2026-05-29T00:00:00Z", "2026-07-31T00:00:00Z"}},
		{"0 0 LW * *", "", "2026-01-01T00:00:00Z", []string{"2026-01-30T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-31T00:00:00Z", "2026-04-30T00:00:00Z", "2026-05-29T00:00:00Z"}},
		{"0 0 1,L * *", "", "2026-01-15T00:00:00Z", []string{"2026-01-31T00:00:00Z", "2026-02-01T00:00:00Z", "2026-02-28T00:00:00Z"}},
		// nL and #.
		{"0 0 * * 5L", "", "2026-01-01T00:00:00Z", []string{"2026-01-30T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-27T00:00:00Z", "2026-04-24T00:00:00Z"}},
		{"0 0 ? * friL", "", "2026-01-01T00:00:00Z", []string{"2026-01-30T00:00:00Z"}},
		{"0 0 ? * FRI#3", "", "2026-01-01T00:00:00Z", []string{"2026-01-16T00:00:00Z", "2026-02-20T00:00:00Z", "2026-03-20T00:00:00Z", "2026-04-17T00:00:00Z"}},
		{"0 0 ? * 1#1,1#3", "", "2026-01-01T00:00:00Z", []string{"2026-01-05T00:00:00Z", "2026-01-19T00:00:00Z", "2026-02-02T00:00:00Z"}},
		{"0 0 * 2 MON#5", "", "2026-01-01T00:00:00Z", []string{"2044-02-29T00:00:00Z", "2072-02-29T00:00:00Z", "2112-02-29T00:00:00Z"}}, // 2100 is no leap year
		// Leap years.
		{"0 0 29 2 *", "", "2026-01-01T00:00:00Z", []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"0 0 29 2 *", "", "2097-01-01T00:00:00Z", []string{"2104-02-29T00:00:00Z"}},
		{"0 0 29 2 *", "", "2399-03-01T00:00:00Z", []string{"2400-02-29T00:00:00Z"}},
		// Vixie: both day fields restricted means either.
		{"0 0 1 * MON", "", "2026-01-31T00:00:00Z", []string{"2026-02-01T00:00:00Z", "2026-02-02T00:00:00Z", "2026-02-09T00:00:00Z"}},
		{"0 0 13 * FRI", "", "2026-02-01T00:00:00Z", []string{"2026-02-06T00:00:00Z", "2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z"}},
		{"0 0 1 * ?", "", "2026-01-31T00:00:00Z", []string{"2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"}},
		{"0 0 ? * MON", "", "2026-01-31T00:00:00Z", []string{"2026-02-02T00:00:00Z", "2026-02-09T00:00:00Z"}},
		// Vixie: a day field that starts with * leaves the days to the other
		// field's values and its own: a day must match both.
		{"0 0 */2 * MON", "", "2026-02-01T00:00:00Z", []string{"2026-02-09T00:00:00Z", "2026-02-23T00:00:00Z", "2026-03-09T00:00:00Z"}},  // Mondays on odd days
		{"0 0 */10 * MON", "", "2026-02-01T00:00:00Z", []string{"2026-05-11T00:00:00Z", "2026-06-01T00:00:00Z", "2026-08-31T00:00:00Z"}}, // Mondays on 1, 11, 21, 31
		{"0 0 */2,4 * MON", "", "2026-02-01T00:00:00Z", []string{"2026-02-09T00:00:00Z", "2026-02-23T00:00:00Z", "2026-03-09T00:00:00Z"}},
		{"0 0 */2 * *", "", "2026-02-01T00:00:00Z", []string{"2026-02-03T00:00:00Z", "2026-02-05T00:00:00Z", "2026-02-07T00:00:00Z"}},
		{"0 0 1-7 * */2", "", "2026-02-01T00:00:00Z", []string{"2026-02-03T00:00:00Z", "2026-02-05T00:00:00Z", "2026-02-07T00:00:00Z", "2026-03-01T00:00:00Z", "2026-03-03T00:00:00Z"}}, // Sun, Tue, Thu, Sat in 1-7
		{"0 0 15 * */3", "", "2026-02-01T00:00:00Z", []string{"2026-02-15T00:00:00Z", "2026-03-15T00:00:00Z", "2026-04-15T00:00:00Z"}},                                                  // a 15th on Sun, Wed or Sat
		// A field that does not start with * is restricted, whatever it lists.
		{"0 0 1,*/2 * MON", "", "2026-02-01T00:00:00Z", []string{"2026-02-02T00:00:00Z", "2026-02-03T00:00:00Z", "2026-02-05T00:00:00Z", "2026-02-07T00:00:00Z", "2026-02-09T00:00:00Z"}},
		// Six fields.
		{"*/10 * * * * *", "", "2026-01-01T10:00:05Z", []string{"2026-01-01T10:00:10Z", "2026-01-01T10:00:20Z"}},
		{"30 0 0 * * *", "", "2026-01-01T00:00:00Z", []string{"2026-01-01T00:00:30Z", "2026-01-02T00:00:30Z"}},
		{"59 59 23 31 12 *", "", "2026-06-01T00:00:00Z", []string{"2026-12-31T23:59:59Z", "2027-12-31T23:59:59Z"}},
		// Descriptors.
		{"@yearly", "", "2026-03-01T00:00:00Z", []string{"2027-01-01T00:00:00Z"}},
		{"@annually", "", "2026-03-01T00:00:00Z", []string{"2027-01-01T00:00:00Z"}},
		{"@monthly", "", "2026-03-01T00:00:00Z", []string{"2026-04-01T00:00:00Z"}},
		{"@weekly", "", "2026-01-01T00:00:00Z", []string{"2026-01-04T00:00:00Z"}},
		{"@daily", "", "2026-01-01T00:00:00Z", []string{"2026-01-02T00:00:00Z"}},
		{"@MIDNIGHT", "", "2026-01-01T00:00:00Z", []string{"2026-01-02T00:00:00Z"}},
		{"@hourly", "", "2026-01-01T00:30:00Z", []string{"2026-01-01T01:00:00Z"}},
		{"@every 90m", "", "2026-01-01T00:10:00Z", []string{"2026-01-01T01:30:00Z", "2026-01-01T03:00:00Z"}},
		{"@every 7m", "", "2026-01-01T00:00:00Z", []string{"2026-01-01T00:07:00Z", "2026-01-01T00:14:00Z"}}, // 2026-01-01 is minute 29453760 = 7*4207680 of the epoch
		{"@every 1h", "", "1969-12-31T22:30:00Z", []string{"1969-12-31T23:00:00Z", "1970-01-01T00:00:00Z"}},
		{"CRON_TZ=Asia/Kolkata @every 1h", "", "2026-01-01T00:00:00Z", []string{"2026-01-01T06:00:00+05:30", "2026-01-01T07:00:00+05:30"}},
		// Time zones.
		{"CRON_TZ=Asia/Tokyo 0 9 * * *", "", "2025-12-31T23:00:00Z", []string{"2026-01-01T09:00:00+09:00", "2026-01-02T09:00:00+09:00"}},
		{"TZ=Asia/Tokyo 0 9 * * *", "America/New_York", "2025-12-31T23:00:00Z", []string{"2026-01-01T09:00:00+09:00"}},
		{"0 9 * * *", "Europe/Berlin", "2026-01-01T00:00:00Z", []string{"2026-01-01T09:00:00+01:00"}},
		{"0 9 * * *", "Europe/Berlin", "2026-07-01T00:00:00Z", []string{"2026-07-01T09:00:00+02:00"}},
	}
	for _, tt := range tests {
		t.Run(tt.spec+"/"+tt.from, func(t *testing.T) {
			var loc *time.Location
			if tt.loc != "" {
				loc = schedLoc(t, tt.loc)
			}
			c, err := parseCronIn(tt.spec, loc)
			if err != nil {
				t.Fatalf("ParseCron(%q): %v", tt.spec, err)
			}
			got := schedNextN(c, schedTime(t, tt.from), len(tt.want))
			if d := schedDiff(got, tt.want); d != "" {
				t.Errorf("ParseCron(%q).Next from %s (-want +got):\n%s", tt.spec, tt.from, d)
			}
		})
	}
}

// TestCronDST checks the daylight-saving rules of the CronSchedule doc in
// three zones. Transitions in 2026:
//
//	America/New_York     Mar 8 02:00 EST -> 03:00 EDT; Nov 1 02:00 EDT -> 01:00 EST
//	Europe/Berlin        Mar 29 02:00 CET -> 03:00 CEST; Oct 25 03:00 CEST -> 02:00 CET
//	Australia/Lord_Howe  Apr 5 02:00 +11 -> 01:30 +1030; Oct 4 02:00 +1030 -> 02:30 +11
func TestCronDST(t *testing.T) {
	tests := []struct {
		name string
		spec string
		from string
		want []string
	}{
		// New York, spring forward: 02:00-02:59 does not exist.
		{"ny skipped runs at gap end", "CRON_TZ=America/New_York 30 2 * * *", "2026-03-07T12:00:00-05:00", []string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"ny skipped with seconds", "CRON_TZ=America/New_York 30 30 2 * * *", "2026-03-08T01:59:00-05:00", []string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:30-04:00"}},
		{"ny several skipped run once", "CRON_TZ=America/New_York */10 2 * * *", "2026-03-08T01:00:00-05:00", []string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00"}},
		{"ny skipped and real slot coincide", "CRON_TZ=America/New_York 0 2,3 * * *", "2026-03-08T01:00:00-05:00", []string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00"}},
		{"ny gap end not repeated", "CRON_TZ=America/New_York 30 2 * * *", "2026-03-08T03:00:00-04:00", []string{"2026-03-09T02:30:00-04:00"}},
		{"ny quarter-hourly through spring", "CRON_TZ=America/New_York */15 * * * *", "2026-03-08T01:30:00-05:00", []string{"2026-03-08T01:45:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:15:00-04:00"}},
		{"ny hourly through spring", "CRON_TZ=America/New_York 30 * * * *", "2026-03-08T01:00:00-05:00", []string{"2026-03-08T01:30:00-05:00", "2026-03-08T03:30:00-04:00"}},
		// New York, fall back: 01:00-01:59 happens twice.
		{"ny repeated runs at first occurrence", "CRON_TZ=America/New_York 30 1 * * *", "2026-10-31T12:00:00-04:00", []string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
		{"ny repeated not again", "CRON_TZ=America/New_York 30 1 * * *", "2026-11-01T01:30:00-04:00", []string{"2026-11-02T01:30:00-05:00"}},
		{"ny from inside second pass", "CRON_TZ=America/New_York 30 1 * * *", "2026-11-01T01:10:00-05:00", []string{"2026-11-02T01:30:00-05:00"}},
		{"ny fixed hours across fall back", "CRON_TZ=America/New_York 0 1,2 * * *", "2026-11-01T00:30:00-04:00", []string{"2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00", "2026-11-02T01:00:00-05:00"}},
		{"ny fixed hour minutes once", "CRON_TZ=America/New_York */20 1 * * *", "2026-11-01T00:59:00-04:00", []string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:20:00-04:00", "2026-11-01T01:40:00-04:00", "2026-11-02T01:00:00-05:00"}},
		{"ny quarter-hourly through fall", "CRON_TZ=America/New_York */15 * * * *", "2026-11-01T01:40:00-04:00", []string{"2026-11-01T01:45:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:15:00-05:00"}},
		{"ny hourly through fall", "CRON_TZ=America/New_York 0 * * * *", "2026-11-01T00:30:00-04:00", []string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"}},
		// Berlin.
		{"berlin skipped", "CRON_TZ=Europe/Berlin 30 2 * * *", "2026-03-28T12:00:00+01:00", []string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
		{"berlin skipped on the hour", "CRON_TZ=Europe/Berlin 0 2 * * *", "2026-03-28T12:00:00+01:00", []string{"2026-03-29T03:00:00+02:00"}},
		{"berlin repeated", "CRON_TZ=Europe/Berlin 30 2 * * *", "2026-10-24T12:00:00+02:00", []string{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
		{"berlin half-hourly through fall", "CRON_TZ=Europe/Berlin */30 * * * *", "2026-10-25T02:10:00+02:00", []string{"2026-10-25T02:30:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T02:30:00+01:00", "2026-10-25T03:00:00+01:00"}},
		// Lord Howe, spring: 02:00-02:29 does not exist.
		{"lord howe skipped", "CRON_TZ=Australia/Lord_Howe 15 2 * * *", "2026-10-03T12:00:00+10:30", []string{"2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"}},
		{"lord howe not skipped", "CRON_TZ=Australia/Lord_Howe 45 2 * * *", "2026-10-03T12:00:00+10:30", []string{"2026-10-04T02:45:00+11:00"}},
		{"lord howe hourly through spring", "CRON_TZ=Australia/Lord_Howe 0 * * * *", "2026-10-04T00:30:00+10:30", []string{"2026-10-04T01:00:00+10:30", "2026-10-04T03:00:00+11:00"}},
		{"lord howe quarter-hourly through spring", "CRON_TZ=Australia/Lord_Howe */15 * * * *", "2026-10-04T01:40:00+10:30", []string{"2026-10-04T01:45:00+10:30", "2026-10-04T02:30:00+11:00", "2026-10-04T02:45:00+11:00"}},
		// Lord Howe, fall: 01:30-01:59 happens twice.
		{"lord howe repeated", "CRON_TZ=Australia/Lord_Howe 45 1 * * *", "2026-04-04T12:00:00+11:00", []string{"2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"}},
		{"lord howe from second pass", "CRON_TZ=Australia/Lord_Howe 45 1 * * *", "2026-04-05T01:35:00+10:30", []string{"2026-04-06T01:45:00+10:30"}},
		{"lord howe not repeated", "CRON_TZ=Australia/Lord_Howe 0 1,2 * * *", "2026-04-05T00:00:00+11:00", []string{"2026-04-05T01:00:00+11:00", "2026-04-05T02:00:00+10:30"}},
		{"lord howe quarter-hourly through fall", "CRON_TZ=Australia/Lord_Howe */15 * * * *", "2026-04-05T01:40:00+11:00", []string{"2026-04-05T01:45:00+11:00", "2026-04-05T01:30:00+10:30", "2026-04-05T01:45:00+10:30", "2026-04-05T02:00:00+10:30"}},
		// Beyond the zone's transition table (Go extends it by yearly rules).
		{"ny 2040 turn of the year", "CRON_TZ=America/New_York 30 2 * * *", "2040-12-30T02:30:00-05:00", []string{"2040-12-31T02:30:00-05:00", "2041-01-01T02:30:00-05:00"}},
		{"ny 2041 skipped", "CRON_TZ=America/New_York 30 2 * * *", "2041-03-09T12:00:00-05:00", []string{"2041-03-10T03:00:00-04:00", "2041-03-11T02:30:00-04:00"}},
		// @every ignores daylight saving.
		{"every counts absolute time", "CRON_TZ=America/New_York @every 1h", "2026-11-01T00:30:00-04:00", []string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseCron(tt.spec)
			if err != nil {
				t.Fatalf("ParseCron(%q): %v", tt.spec, err)
			}
			got := schedNextN(c, schedTime(t, tt.from), len(tt.want))
			if d := schedDiff(got, tt.want); d != "" {
				t.Errorf("ParseCron(%q).Next from %s (-want +got):\n%s", tt.spec, tt.from, d)
			}
		})
	}
}

// TestCronDSTYearByYear walks a daily and a quarter-hourly schedule through
// a year of each zone (some past the zone's transition table) and checks the rules run by run: strictly increasing
// times, one run per calendar day for the daily one, and, for the
// quarter-hourly one, 15 minutes of absolute time between runs.
func TestCronDSTYearByYear(t *testing.T) {
	for _, zy := range []struct {
		zone string
		year int
	}{
		{"America/New_York", 2026}, {"Europe/Berlin", 2026}, {"Australia/Lord_Howe", 2026},
		{"America/New_York", 2040}, {"Australia/Lord_Howe", 2040}, // leap years past the tables
	} {
		zone := zy.zone
		loc := schedLoc(t, zone)
		start := time.Date(zy.year, 1, 1, 0, 0, 0, 0, loc)
		end := time.Date(zy.year+1, 1, 1, 0, 0, 0, 0, loc)
		wantDays := int(end.Sub(start).Round(24*time.Hour) / (24 * time.Hour))
		for _, hm := range []string{"30 1", "15 2", "59 2", "0 3"} {
			c := mustParseCron(hm+" * * *", loc)
			days := map[string]int{}
			prev := start
			for tm := c.Next(start); tm.Before(end); tm = c.Next(tm) {
				if !tm.After(prev) {
					t.Fatalf("%s %q: %v does not follow %v", zone, hm, tm, prev)
				}
				days[tm.Format("2006-01-02")]++
				prev = tm
			}
			if len(days) != wantDays {
				t.Errorf("%s %q: ran on %d days of %d, want %d", zone, hm, len(days), zy.year, wantDays)
			}
			for d, n := range days {
				if n != 1 {
					t.Errorf("%s %q: %d runs on %s, want 1", zone, hm, n, d)
				}
			}
		}
		c := mustParseCron("*/15 * * * *", loc)
		prev := c.Next(start)
		for tm := c.Next(prev); tm.Before(end); tm = c.Next(tm) {
			if got := tm.Sub(prev); got != 15*time.Minute {
				t.Fatalf("%s */15: %v after %v is %v later, want 15m", zone, tm, prev, got)
			}
			prev = tm
		}
	}
}

func TestParseCronErrors(t *testing.T) {
	tests := []struct {
		spec  string
		want  string
		field string
		token string
	}{
		{"0 25 * * *", "cron: hour field: 25 is out of range [0,23]", "hour", "25"},
		{"0 0 1 FOO *", `cron: month field: unknown name "FOO"`, "month", "FOO"},
		{"0 0 *", "cron: expected 5 or 6 fields, got 3", "", "0 0 *"},
		{"", "cron: expected 5 or 6 fields, got 0", "", ""},
		{"0 0 * * * * *", "cron: expected 5 or 6 fields, got 7", "", "0 0 * * * * *"},
		{"CRON_TZ=Mars/Base 0 0 * * *", `cron: unknown time zone "Mars/Base"`, "", "Mars/Base"},
		{"TZ=Mars/Base 0 0 * * *", `cron: unknown time zone "Mars/Base"`, "", "Mars/Base"},
		{"CRON_TZ= 0 0 * * *", `cron: unknown time zone ""`, "", ""},
		{"60 * * * *", "cron: minute field: 60 is out of range [0,59]", "minute", "60"},
		{"60 * * * * *", "cron: second field: 60 is out of range [0,59]", "second", "60"},
		{"0 0 32 * *", "cron: day-of-month field: 32 is out of range [1,31]", "day-of-month", "32"},
		{"0 0 0 * *", "cron: day-of-month field: 0 is out of range [1,31]", "day-of-month", "0"},
		{"0 0 * 13 *", "cron: month field: 13 is out of range [1,12]", "month", "13"},
		{"0 0 * * 8", "cron: day-of-week field: 8 is out of range [0,7]", "day-of-week", "8"},
		{"0 0 * * 99999999999", "cron: day-of-week field: 99999999999 is out of range [0,7]", "day-of-week", "99999999999"},
		{"0 0 * * FOO", `cron: day-of-week field: unknown name "FOO"`, "day-of-week", "FOO"},
		{"x * * * *", `cron: minute field: invalid value "x"`, "minute", "x"},
		{"-1 * * * *", `cron: minute field: missing value in "-1"`, "minute", "-1"},
		{"0 0 * * MON-", `cron: day-of-week field: missing value in "MON-"`, "day-of-week", "MON-"},
		{"*/0 * * * *", "cron: minute field: step 0 is out of range [1,59]", "minute", "*/0"},
		{"*/x * * * *", `cron: minute field: invalid step "x" in "*/x"`, "minute", "*/x"},
		{"5-2 * * * *", "cron: minute field: range 5-2 runs backwards", "minute", "5-2"},
		{"1,,2 * * * *", `cron: minute field: empty item in "1,,2"`, "minute", "1,,2"},
		{"? * * * *", `cron: minute field: "?" is only allowed in the day fields`, "minute", "?"},
		{"0 0 1,? * *", `cron: day-of-month field: "?" must stand alone in the field`, "day-of-month", "?"},
		{"0 0 L-31 * *", "cron: day-of-month field: L-31 is out of range: the offset must be in [0,30]", "day-of-month", "L-31"},
		{"0 0 L-x * *", `cron: day-of-month field: invalid offset in "L-x"`, "day-of-month", "L-x"},
		{"0 0 32W * *", "cron: day-of-month field: 32W is out of range: the day must be in [1,31]", "day-of-month", "32W"},
		{"0 0 * * FRI#6", "cron: day-of-week field: FRI#6 is out of range: the occurrence must be in [1,5]", "day-of-week", "FRI#6"},
		{"0 0 * * XYZ#2", `cron: day-of-week field: unknown name "XYZ"`, "day-of-week", "XYZ"},
		{"0 0 * * L", `cron: day-of-week field: "L" needs a day before it here, such as 5L (the last Friday)`, "day-of-week", "L"},
		{"0 0 L * 5W", `cron: day-of-week field: unknown name "5W"`, "day-of-week", "5W"},
		{"0 0 30 2 *", `cron: day-of-month field: no day matches "30" in months "2"`, "day-of-month", "30"},
		{"0 0 31 4,6,9,11 *", `cron: day-of-month field: no day matches "31" in months "4,6,9,11"`, "day-of-month", "31"},
		{"0 0 30W FEB ?", `cron: day-of-month field: no day matches "30W" in months "FEB"`, "day-of-month", "30W"},
		{"@foo", `cron: unknown descriptor "@foo"`, "", "@foo"},
		{"@every", `cron: invalid duration "" after @every`, "", ""},
		{"@every soon", `cron: invalid duration "soon" after @every`, "", "soon"},
		{"@every -1s", `cron: duration "-1s" after @every must be positive`, "", "-1s"},
		{"@daily 1", `cron: unexpected "1" after @daily`, "", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			c, err := ParseCron(tt.spec)
			if err == nil {
				t.Fatalf("ParseCron(%q) = %v, want error %q", tt.spec, c, tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("ParseCron(%q) error:\n got %s\nwant %s", tt.spec, got, tt.want)
			}
			if !errors.Is(err, ErrInvalidCron) {
				t.Errorf("errors.Is(%v, ErrInvalidCron) = false, want true", err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *ParseError", err)
			}
			if diff := cmp.Diff([2]string{tt.field, tt.token}, [2]string{pe.Field, pe.Token}); diff != "" {
				t.Errorf("ParseCron(%q) [Field Token] (-want +got):\n%s", tt.spec, diff)
			}
		})
	}
}

func TestParseCronZoneErrorUnwraps(t *testing.T) {
	_, err := ParseCron("CRON_TZ=Mars/Base * * * * *")
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Unwrap() == nil {
		t.Fatalf("ParseCron error %v: want a *ParseError wrapping the LoadLocation error", err)
	}
}

func TestCronString(t *testing.T) {
	tests := []struct{ spec, want string }{
		{"*/5 * * * *", "*/5 * * * *"},
		{"0 9 * * MON-FRI", "0 9 * * 1-5"},
		{"@daily", "0 0 * * *"},
		{"@hourly", "0 * * * *"},
		{"@weekly", "0 0 * * 0"},
		{"0 0 1-30/2 * *", "0 0 1-29/2 * *"},
		{"5/15 * * * *", "5-50/15 * * * *"},
		{"0 0 L,15W,LW,L-2 * *", "0 0 L,L-2,15W,LW * *"},
		{"0 0 ? * 5L,FRI#3", "0 0 * * 5L,5#3"},
		{"CRON_TZ=Europe/Berlin 0 0 * * *", "CRON_TZ=Europe/Berlin 0 0 * * *"},
		{"tz=Europe/Berlin @EVERY 1h", "CRON_TZ=Europe/Berlin @every 1h0m0s"},
		{"0 30 * * * *", "30 * * * *"},
		{"15 30 * * * *", "15 30 * * * *"},
		{"*/1 * * * *", "* * * * *"},
		{"0 0 */1 * *", "0 0 * * *"},       // unrestricted and every day: *
		{"0 0 1-31 * MON", "0 0 1-31 * 1"}, // restricted, though to every day
		{"0 0 */2 * MON", "0 0 */2 * 1"},
		{"0 0 */10,15 * MON", "0 0 */10,15 * 1"},
		{"0 0 */2,2-31/2 * MON", "0 0 * * 1"}, // unrestricted, every day listed
		{"0 0 1,*/2 * MON", "0 0 1-31/2 * 1"}, // restricted: no leading *
		{"0 0 1 * */3,1", "0 0 1 * */3,1"},
		{"0 0 * * 0-7", "0 0 * * 0-6"}, // restricted, though to every day
		{"0 0 1 * 0-7", "0 0 1 * 0-6"},
		{"0 0 1,2 * *", "0 0 1,2 * *"},
		{"0 0 1,2,3,5 * *", "0 0 1-3,5 * *"},
		{"0 0 1 JAN-MAR,oct *", "0 0 1 1-3,10 *"},
		{"0 0 ? * SAT-SUN", "0 0 * * 0,6"},
		{"0 0 * * 1,3,5", "0 0 * * 1-5/2"},
		{"0 0 * * */2", "0 0 * * */2"},
		{"  0   0 \t * * *  ", "0 0 * * *"},
	}
	for _, tt := range tests {
		c, err := ParseCron(tt.spec)
		if err != nil {
			t.Errorf("ParseCron(%q): %v", tt.spec, err)
			continue
		}
		if got := c.String(); got != tt.want {
			t.Errorf("ParseCron(%q).String() = %q, want %q", tt.spec, got, tt.want)
		}
	}
}

func TestCronStringWithLocation(t *testing.T) {
	c := mustParseCron("0 9 * * *", schedLoc(t, "Asia/Tokyo"))
	if got, want := c.String(), "CRON_TZ=Asia/Tokyo 0 9 * * *"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := c.Location().String(); got != "Asia/Tokyo" {
		t.Errorf("Location() = %q, want Asia/Tokyo", got)
	}
	if got := mustParseCron("0 9 * * *", nil).Location(); got != time.UTC {
		t.Errorf("no location: Location() = %v, want UTC", got)
	}
}

func TestCronZeroAndNil(t *testing.T) {
	var nilC *CronSchedule
	after := schedTime(t, "2026-01-01T00:00:00Z")
	if got := nilC.Next(after); !got.IsZero() {
		t.Errorf("nil Next = %v, want zero", got)
	}
	if got := (&CronSchedule{}).Next(after); !got.IsZero() {
		t.Errorf("zero CronSchedule Next = %v, want zero", got)
	}
	if got := nilC.String(); got != "" {
		t.Errorf("nil String = %q, want empty", got)
	}
}

// roundTrip checks that parse -> String -> parse gives an equal schedule.
func cronRoundTrip(t testing.TB, c *CronSchedule) {
	t.Helper()
	s := c.String()
	c2, err := ParseCron(s)
	if err != nil {
		t.Fatalf("ParseCron(String() = %q): %v", s, err)
	}
	if s2 := c2.String(); s2 != s {
		t.Fatalf("String of reparsed %q = %q", s, s2)
	}
	if diff := cmp.Diff(c, c2, cmp.AllowUnexported(CronSchedule{}), cmp.Comparer(func(a, b *time.Location) bool { return a.String() == b.String() })); diff != "" {
		t.Fatalf("reparsed %q differs (-first +second):\n%s", s, diff)
	}
	for _, from := range []time.Time{
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC),
	} {
		a, b := c, c2
		for range 3 {
			na, nb := a.Next(from), b.Next(from)
			if !na.Equal(nb) {
				t.Fatalf("%q: Next(%v) = %v, reparsed gives %v", s, from, na, nb)
			}
			if na.IsZero() {
				break
			}
			if !na.After(from) {
				t.Fatalf("%q: Next(%v) = %v, not after", s, from, na)
			}
			from = na
		}
	}
}

func TestCronRoundTrip(t *testing.T) {
	for _, spec := range cronSeeds {
		c, err := ParseCron(spec)
		if err != nil {
			continue // the seeds include bad expressions for the fuzzer
		}
		t.Run(spec, func(t *testing.T) { cronRoundTrip(t, c) })
	}
}

// cronSeeds feeds the round-trip test and the fuzzer.
var cronSeeds = []string{
	"* * * * *", "0 0 * * *", "*/15 * * * *", "30 9 * * MON-FRI", "0 12 1-30/2 * *", "5/15 * * * *",
	"0 8,12,18 * * *", "0 0 1 jan,Jul *", "0 0 * * sat-SUN", "0 0 * * 7", "0 0 * * 5-7",
	"0 0 L * *", "0 0 L-3 * *", "0 0 LW * *", "0 0 15W * *", "0 0 1W,L * *", "0 0 * * 5L", "0 0 ? * FRI#3",
	"0 0 * 2 MON#5", "0 0 29 2 *", "0 0 1 * MON", "0 0 13 * FRI", "0 0 */10 * MON", "*/10 * * * * *",
	"59 59 23 31 12 *", "@yearly", "@monthly", "@weekly", "@daily", "@hourly", "@every 90m", "@every 1.5s",
	"CRON_TZ=Asia/Tokyo 0 9 * * *", "TZ=America/New_York 30 2 * * *", "CRON_TZ=Australia/Lord_Howe */15 * * * *",
	"0 0 30 2 *", "0 25 * * *", "0 0 1 FOO *", "@every -1s", "CRON_TZ=Mars/Base * * * * *", "1,,2 * * * *",
	"0 0 L-31 * *", "0 0 * * FRI#6", "0 0 ? * 1#1,1#3,2L", "0-59/7 1-23/3 */3 */2 */2",
	"0 0 */2 * MON", "0 0 */10,15 * MON", "0 0 1,*/2 * MON", "0 0 1 * */3,1", "0 0 */2,L,15W * 5L",
	"0 0 */7 * */7", "0 0 */2,2-31/2 * MON",
}

// TestCronNextMatchesBruteForce compares Next on random expressions with a
// slow reference that checks each day with the time package and scans its
// minutes.
func TestCronNextMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n, compared := 300, 0
	if testing.Short() {
		n = 50
	}
	for range n {
		spec := randomSpec(rng)
		c, err := ParseCron(spec)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || !strings.HasPrefix(pe.Reason, "no day matches") {
				t.Fatalf("ParseCron(%q): %v", spec, err)
			}
			continue
		}
		// The reference reads Vixie's rule from the text: a day field that
		// starts with * combines with the other by AND.
		f := strings.Fields(spec)
		if got, want := [2]bool{c.domStar != 0, c.dowStar != 0}, [2]bool{f[2][0] == '*', f[4][0] == '*'}; got != want {
			t.Fatalf("ParseCron(%q): day fields unrestricted (dom, dow) = %v, want %v", spec, got, want)
		}
		from := time.Date(2024+rng.IntN(4), time.Month(1+rng.IntN(12)), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), 0, 0, time.UTC)
		got := c.Next(from)
		want := bruteNext(c, from, 20*366)
		if !got.Equal(want) {
			t.Fatalf("ParseCron(%q).Next(%v) = %v, brute force gives %v", spec, from, got, want)
		}
		if !got.IsZero() {
			compared++
		}
	}
	if compared < n/2 {
		t.Errorf("only %d of %d random expressions had a run to compare", compared, n)
	}
}

func randomSpec(rng *rand.Rand) string {
	item := func(lo, hi int) string {
		a := lo + rng.IntN(hi-lo+1)
		b := a + rng.IntN(hi-a+1)
		switch rng.IntN(6) {
		case 0:
			return "*"
		case 1:
			return "*/" + strconv.Itoa(1+rng.IntN(hi))
		case 2:
			return strconv.Itoa(a) + "-" + strconv.Itoa(b)
		case 3:
			return strconv.Itoa(a) + "/" + strconv.Itoa(1+rng.IntN(hi))
		default:
			return strconv.Itoa(a)
		}
	}
	list := func(lo, hi int, specials ...string) string {
		var parts []string
		for range 1 + rng.IntN(3) {
			if len(specials) > 0 && rng.IntN(3) == 0 {
				parts = append(parts, specials[rng.IntN(len(specials))])
				continue
			}
			it := item(lo, hi)
			if it == "*" {
				return "*"
			}
			parts = append(parts, it)
		}
		return strings.Join(parts, ",")
	}
	w := strconv.Itoa(rng.IntN(7))
	return strings.Join([]string{
		list(0, 59), list(0, 23),
		list(1, 31, "L", "L-"+strconv.Itoa(rng.IntN(5)), strconv.Itoa(1+rng.IntN(31))+"W", "LW"),
		list(1, 12),
		list(0, 6, w+"L", w+"#"+strconv.Itoa(1+rng.IntN(5))),
	}, " ")
}

// bruteNext is the reference: five-field expressions in UTC only.
func bruteNext(c *CronSchedule, from time.Time, maxDays int) time.Time {
	day := time.Date(from.Year(), from.Month(), from.Day(), 0, 0, 0, 0, time.UTC)
	for range maxDays {
		if bruteDay(c, day) {
			for m := 0; m < 24*60; m++ {
				tm := day.Add(time.Duration(m) * time.Minute)
				if tm.After(from) && c.hour&(1<<tm.Hour()) != 0 && c.min&(1<<tm.Minute()) != 0 {
					return tm
				}
			}
		}
		day = day.AddDate(0, 0, 1)
	}
	return time.Time{}
}

func bruteDay(c *CronSchedule, day time.Time) bool {
	if c.month&(1<<int(day.Month())) == 0 {
		return false
	}
	d := day.Day()
	dim := time.Date(day.Year(), day.Month()+1, 0, 0, 0, 0, 0, time.UTC).Day()
	isWeekday := func(x int) bool {
		wd := time.Date(day.Year(), day.Month(), x, 0, 0, 0, 0, time.UTC).Weekday()
		return wd != time.Saturday && wd != time.Sunday
	}
	domMatch := c.dom&(1<<d) != 0
	for n := 0; n <= 30; n++ {
		if c.domL&(1<<n) != 0 && d == dim-n {
			domMatch = true
		}
	}
	for x := 1; x <= 31; x++ {
		if c.domW&(1<<x) == 0 || x > dim {
			continue
		}
		best := 0 // the weekday of the month nearest to x
		for y := 1; y <= dim; y++ {
			if isWeekday(y) && (best == 0 || absInt(y-x) < absInt(best-x)) {
				best = y
			}
		}
		if best == d {
			domMatch = true
		}
	}
	if c.domLW {
		last := dim
		for !isWeekday(last) {
			last--
		}
		if d == last {
			domMatch = true
		}
	}
	wd := int(day.Weekday())
	dowMatch := c.dow&(1<<wd) != 0 ||
		c.dowL&(1<<wd) != 0 && d+7 > dim ||
		c.dowHash[(d-1)/7+1]&(1<<wd) != 0
	// Vixie cron: a field that starts with * (domStar, dowStar) makes the
	// two fields combine with AND, else with OR.
	domMatch = domMatch || c.domAny
	dowMatch = dowMatch || c.dowAny
	if c.domStar != 0 || c.dowStar != 0 {
		return domMatch && dowMatch
	}
	return domMatch || dowMatch
}

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func BenchmarkCronNext(b *testing.B) {
	for _, spec := range []string{
		"*/15 * * * *",
		"30 9 * * MON-FRI",
		"0 0 L * *",
		"0 0 ? * FRI#3",
		"0 0 29 2 *",
		"CRON_TZ=America/New_York 30 2 * * *",
		"CRON_TZ=Europe/Berlin */15 * * * *",
		"@every 90s",
	} {
		c := mustParseCron(spec, nil)
		b.Run(spec, func(b *testing.B) {
			t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for b.Loop() {
				t = c.Next(t)
				if t.Year() > 2200 {
					t = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
				}
			}
		})
	}
}

// BenchmarkCronNextScan is the baseline for BenchmarkCronNext: the naive
// search that steps minute by minute and tests each one.
func BenchmarkCronNextScan(b *testing.B) {
	for _, spec := range []string{"*/15 * * * *", "30 9 * * MON-FRI", "0 0 L * *"} {
		c := mustParseCron(spec, nil)
		b.Run(spec, func(b *testing.B) {
			t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for b.Loop() {
				t = scanNext(c, t)
			}
		})
	}
}

func scanNext(c *CronSchedule, from time.Time) time.Time {
	for t := from.Truncate(time.Minute).Add(time.Minute); ; t = t.Add(time.Minute) {
		if c.hour&(1<<t.Hour()) != 0 && c.min&(1<<t.Minute()) != 0 && bruteDay(c, t) {
			return t
		}
	}
}

func BenchmarkParseCron(b *testing.B) {
	for b.Loop() {
		if _, err := ParseCron("0 9-17/2 1,15,L * MON-FRI"); err != nil {
			b.Fatal(err)
		}
	}
}

// mustParseCron parses spec read in loc (nil: UTC), as a job's
// schedule.tz reads it, and panics on error.
func mustParseCron(spec string, loc *time.Location) *CronSchedule {
	c, err := parseCronIn(spec, loc)
	if err != nil {
		panic(err)
	}
	return c
}
