package cron

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// CronSchedule is a parsed cron expression: a [Schedule] whose run times are
// the wall-clock times, in its location, that match every field. Build one
// with [ParseCron]; the zero value and nil never run.
//
// # Syntax
//
// Five fields (minute hour day-of-month month day-of-week), or six with a
// seconds field first. A five-field expression runs at second 0. Each field is
// a comma-separated list of items:
//
//	5          one value
//	1-5        a range (in day-of-week SUN may end a range: SAT-SUN)
//	*          every value of the field
//	?          the same as *, in the two day fields only
//	*/15       every 15th value from the field's minimum
//	1-30/2     every 2nd value of a range
//	5/15       every 15th value from 5 to the field's maximum
//
// Months may be named JAN-DEC and days of the week SUN-SAT, in any case.
// Day-of-week counts 0-6 from Sunday, and 7 is Sunday as well. Quartz's
// special items are accepted too, mixed freely with the plain ones:
//
//	day-of-month  L      the last day of the month
//	              L-3    the third day before the last (L-0 is L)
//	              15W    the weekday (Monday to Friday) nearest the 15th, not
//	                     leaving the month: a Saturday 1st moves to Monday 3rd
//	              LW     the last weekday of the month
//	day-of-week   5L     the last Friday of the month (FRIL is the same)
//	              FRI#3  the third Friday of the month (occurrence 1 to 5)
//
// A day-of-month item that the month does not have (31 in April, 30W in
// February) does not run that month. An expression that can never run, such
// as "0 0 30 2 *", is rejected by [ParseCron].
//
// The two day fields combine as in Vixie cron (and cronie). A day field
// whose text starts with * (such as *, */2 or */10,15) or is ? is
// unrestricted in Vixie's sense. When both day fields are restricted, a day
// runs when it matches either of them: "0 0 1 * MON" runs on the 1st of each
// month and on every Monday. When one of them is unrestricted, a day runs
// when it matches both: "0 0 * * MON" runs on Mondays, "0 0 */2 * MON" on
// the Mondays that fall on an odd day of the month (1, 3, 5, ... 31), and
// "0 0 1-7 * */2" on the days 1 to 7 that are a Sunday, Tuesday, Thursday or
// Saturday.
//
// Descriptors replace the five fields: @yearly (or @annually) "0 0 1 1 *",
// @monthly "0 0 1 * *", @weekly "0 0 * * 0", @daily (or @midnight)
// "0 0 * * *", @hourly "0 * * * *", and @every <duration> (a Go duration
// such as 90s or 1h30m): a fixed interval on the grid that starts at midnight
// of 1 January 1970 in the location (the Unix epoch itself in UTC), so that
// "@every 1h" runs on the hour and "@every 24h" at midnight by the offset the
// zone had in 1970 (for most zones, their standard time). @every counts
// absolute time and ignores daylight saving.
//
// # Time zones
//
// The expression is read in UTC, or for a job in its schedule's time zone
// ([ScheduleSpec].TZ). A prefix CRON_TZ=Zone or TZ=Zone, with an IANA zone name such as
// Europe/Berlin, overrides it: "CRON_TZ=Asia/Tokyo 0 9 * * MON-FRI". Next
// returns times in that location.
//
// # Daylight saving
//
// A schedule whose hour field is restricted (a set of hours, not all 24) runs
// at wall-clock times of day, and the clock changes follow two rules:
//
//   - A wall time skipped by a spring-forward runs once, at the first instant
//     after the gap: "30 2 * * *" in America/New_York runs at 03:00 EDT on the
//     day the clocks jump from 02:00 to 03:00. Several skipped slots (as in
//     "*/10 2 * * *") make a single run at that instant.
//   - A wall time that occurs twice in a fall-back runs once, at its first
//     occurrence: "30 1 * * *" in America/New_York runs at 01:30 EDT and not
//     again at 01:30 EST.
//
// A schedule whose hour field covers all 24 hours ("*/15 * * * *",
// "0 * * * *", "* * * * * *") is a periodic schedule inside the day and
// follows the clock as it is, as Vixie cron does with such jobs: a wall time
// that does not exist never comes, and one that happens twice comes twice.
// So "*/15 * * * *" runs every 15 minutes of absolute time straight through
// both changes (01:45 EST, then 03:00 EDT; 01:45 EDT, 01:00 EST, 01:15 EST),
// and "0 * * * *" runs once an hour, 01:00 EDT, 01:00 EST, 02:00 EST. In a
// zone that shifts by 30 minutes (Australia/Lord_Howe), an hourly schedule
// then sees one interval of 90 minutes in spring and one of 90 minutes in
// autumn, which is what the clock on the wall shows.
type CronSchedule struct {
	loc    *time.Location
	every  time.Duration // > 0 for @every
	origin time.Time     // grid origin of @every

	sec, min uint64 // bits 0-59
	hour     uint32 // bits 0-23
	dom      uint32 // bits 1-31, plain days
	month    uint16 // bits 1-12
	dow      uint8  // bits 0-6, plain weekdays

	domAny, dowAny bool // the field matches every day: *, ? or a */n list that covers them all
	// domStar and dowStar are the step of a field that starts with "*/"
	// (1 for * and ?), 0 for a field that does not start with *. A field
	// that starts with * is unrestricted in Vixie cron's sense.
	domStar, dowStar uint8
	domL             uint32    // bit n: L-n
	domW             uint32    // bit d: dW
	domLW            bool      // LW
	dowL             uint8     // bit w: wL
	dowHash          [6]uint8  // dowHash[k], bit w: w#k
	dowByFirst       [7]uint32 // plain dow days of a month whose 1st is weekday i
	wall             bool      // all 24 hours: follow the wall clock across DST
}

// ParseError is the error of [ParseCron]. It names the field and the token
// that are wrong, for example
//
//	cron: hour field: 25 is out of range [0,23]
//	cron: month field: unknown name "FOO"
//	cron: expected 5 or 6 fields, got 3
//	cron: unknown time zone "Mars/Base"
type ParseError struct {
	// Field is the field at fault: "second", "minute", "hour",
	// "day-of-month", "month" or "day-of-week"; empty when the error is
	// about the whole expression (field count, time zone, descriptor).
	Field string
	// Token is the offending text: an item of the field, a zone name, a
	// descriptor or a duration.
	Token string
	// Reason describes the problem, token included.
	Reason string
	// Err is the underlying error, if any (from time.LoadLocation or
	// time.ParseDuration).
	Err error
}

// Error returns "cron: <field> field: <reason>", or "cron: <reason>" when
// no field is at fault.
func (e *ParseError) Error() string {
	if e.Field == "" {
		return "cron: " + e.Reason
	}
	return "cron: " + e.Field + " field: " + e.Reason
}

// Unwrap returns the underlying error, if any.
func (e *ParseError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrInvalidCron].
func (e *ParseError) Is(target error) bool { return target == ErrInvalidCron }

type fieldKind int

const (
	fSecond fieldKind = iota
	fMinute
	fHour
	fDom
	fMonth
	fDow
)

type fieldInfo struct {
	name     string
	min, max int
	names    map[string]int
}

var monthNames = map[string]int{
	"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6,
	"JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12,
}

var dowNames = map[string]int{"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}

var fieldInfos = [6]fieldInfo{
	fSecond: {"second", 0, 59, nil},
	fMinute: {"minute", 0, 59, nil},
	fHour:   {"hour", 0, 23, nil},
	fDom:    {"day-of-month", 1, 31, nil},
	fMonth:  {"month", 1, 12, monthNames},
	fDow:    {"day-of-week", 0, 7, dowNames},
}

var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// ParseCron parses a cron expression (syntax in [CronSchedule]). Errors are
// *[ParseError] values naming the field and token at fault.
func ParseCron(spec string) (*CronSchedule, error) { return parseCronIn(spec, nil) }

// parseCronIn parses spec read in loc (nil: UTC) unless it carries its
// own CRON_TZ= or TZ= prefix: how a job's schedule.tz applies.
func parseCronIn(spec string, loc *time.Location) (*CronSchedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	s := strings.TrimSpace(spec)
	if rest, ok := cutPrefixFold(s, "CRON_TZ="); ok {
		name, tail := cutSpace(rest)
		l, err := loadZone(name)
		if err != nil {
			return nil, err
		}
		loc, s = l, tail
	} else if rest, ok := cutPrefixFold(s, "TZ="); ok {
		name, tail := cutSpace(rest)
		l, err := loadZone(name)
		if err != nil {
			return nil, err
		}
		loc, s = l, tail
	}
	c := &CronSchedule{loc: loc}
	if strings.HasPrefix(s, "@") {
		word, arg := cutSpace(s)
		lw := strings.ToLower(word)
		if lw == "@every" {
			d, err := time.ParseDuration(arg)
			if err != nil || arg == "" {
				return nil, &ParseError{Token: arg, Reason: fmt.Sprintf("invalid duration %q after @every", arg), Err: err}
			}
			if d <= 0 {
				return nil, &ParseError{Token: arg, Reason: fmt.Sprintf("duration %q after @every must be positive", arg)}
			}
			c.every = d
			c.origin = time.Date(1970, 1, 1, 0, 0, 0, 0, loc)
			return c, nil
		}
		exp, ok := descriptors[lw]
		if !ok {
			return nil, &ParseError{Token: word, Reason: fmt.Sprintf("unknown descriptor %q", word)}
		}
		if arg != "" {
			return nil, &ParseError{Token: arg, Reason: fmt.Sprintf("unexpected %q after %s", arg, word)}
		}
		s = exp
	}
	f := strings.Fields(s)
	switch len(f) {
	case 5:
		f = append([]string{"0"}, f...)
	case 6:
	default:
		return nil, &ParseError{Token: s, Reason: fmt.Sprintf("expected 5 or 6 fields, got %d", len(f))}
	}
	for k := fSecond; k <= fDow; k++ {
		if err := c.parseField(k, f[k]); err != nil {
			return nil, err
		}
	}
	c.finish()
	if !c.possible() {
		return nil, &ParseError{Field: fieldInfos[fDom].name, Token: f[fDom],
			Reason: fmt.Sprintf("no day matches %q in months %q", f[fDom], f[fMonth])}
	}
	return c, nil
}

func loadZone(name string) (*time.Location, error) {
	if name == "" {
		return nil, &ParseError{Token: name, Reason: fmt.Sprintf("unknown time zone %q", name)}
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, &ParseError{Token: name, Reason: fmt.Sprintf("unknown time zone %q", name), Err: err}
	}
	return l, nil
}

// cronPrefixZone returns the zone name of a CRON_TZ= or TZ= prefix of
// the expression spec, or "" when it has none.
func cronPrefixZone(spec string) string {
	s := strings.TrimSpace(spec)
	rest, ok := cutPrefixFold(s, "CRON_TZ=")
	if !ok {
		rest, ok = cutPrefixFold(s, "TZ=")
	}
	if !ok {
		return ""
	}
	name, _ := cutSpace(rest)
	return name
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// cutSpace splits s at its first run of white space.
func cutSpace(s string) (head, tail string) {
	i := strings.IndexAny(s, " \t\n\r\v\f")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimSpace(s[i:])
}

func (c *CronSchedule) parseField(k fieldKind, text string) error {
	fi := &fieldInfos[k]
	if text == "*" || text == "?" {
		if text == "?" && k != fDom && k != fDow {
			return &ParseError{Field: fi.name, Token: text, Reason: `"?" is only allowed in the day fields`}
		}
		switch k {
		case fDom:
			c.domAny, c.domStar = true, 1
		case fDow:
			c.dowAny, c.dowStar = true, 1
		}
		c.setBits(k, rangeBits(fi.min, fi.max, 1))
		return nil
	}
	if (k == fDom || k == fDow) && strings.HasPrefix(text, "*/") {
		// The first item is */n (a lone * must stand alone, see parseItem).
		first, _, _ := strings.Cut(text, ",")
		if n, ok := number(first[2:]); ok && n >= 1 && n <= 255 {
			if k == fDom {
				c.domStar = uint8(n)
			} else {
				c.dowStar = uint8(n)
			}
		}
	}
	var all uint64
	for _, item := range strings.Split(text, ",") {
		if item == "" {
			return &ParseError{Field: fi.name, Token: text, Reason: fmt.Sprintf("empty item in %q", text)}
		}
		b, special, err := c.parseItem(k, item)
		if err != nil {
			return err
		}
		if !special {
			all |= b
		}
	}
	c.setBits(k, all)
	return nil
}

func (c *CronSchedule) setBits(k fieldKind, b uint64) {
	switch k {
	case fSecond:
		c.sec = b
	case fMinute:
		c.min = b
	case fHour:
		c.hour = uint32(b)
	case fDom:
		c.dom = uint32(b)
	case fMonth:
		c.month = uint16(b)
	case fDow:
		if b&(1<<7) != 0 {
			b = b&^(1<<7) | 1
		}
		c.dow = uint8(b)
	}
}

// parseItem parses one list item. special reports a Quartz item, recorded in
// c directly; otherwise b holds the values.
func (c *CronSchedule) parseItem(k fieldKind, item string) (b uint64, special bool, err error) {
	fi := &fieldInfos[k]
	up := asciiUpper(item)
	if item == "?" || item == "*" && k >= fDom && k != fMonth {
		if item == "?" && k != fDom && k != fDow {
			return 0, false, &ParseError{Field: fi.name, Token: item, Reason: `"?" is only allowed in the day fields`}
		}
		return 0, false, &ParseError{Field: fi.name, Token: item, Reason: fmt.Sprintf("%q must stand alone in the field", item)}
	}
	if k == fDom {
		switch {
		case up == "L":
			c.domL |= 1
			return 0, true, nil
		case up == "LW":
			c.domLW = true
			return 0, true, nil
		case strings.HasPrefix(up, "L-"):
			n, ok := number(up[2:])
			if !ok {
				return 0, false, &ParseError{Field: fi.name, Token: item, Reason: fmt.Sprintf("invalid offset in %q", item)}
			}
			if n > 30 {
				return 0, false, &ParseError{Field: fi.name, Token: item, Reason: fmt.Sprintf("%s is out of range: the offset must be in [0,30]", item)}
			}
			c.domL |= 1 << n
			return 0, true, nil
		case len(up) > 1 && up[len(up)-1] == 'W':
			n, ok := number(up[:len(up)-1])
			if !ok {
				return 0, false, &ParseError{Field: fi.name, Token: item, Reason: fmt.Sprintf("invalid day in %q", item)}
			}
			if n < 1 || n > 31 {
				return 0, false, &ParseError{Field: fi.name, Token: item, Reason: fmt.Sprintf("%s is out of range: the day must be in [1,31]", item)}
			}
			c.domW |= 1 << n
			return 0, true, nil
		}
	}
	if k == fDow {
		if i := strings.IndexByte(up, '#'); i >= 0 {
			w, err := c.value(k, item[:i], item)
			if err != nil {
				return 0, false, err
			}
			n, ok := number(up[i+1:])
			if !ok || n < 1 || n > 5 {
				return 0, false, &ParseError{Field: fi.name, Token: item, Reason: fmt.Sprintf("%s is out of range: the occurrence must be in [1,5]", item)}
			}
			c.dowHash[n] |= 1 << (w % 7)
			return 0, true, nil
		}
		if up == "L" {
			return 0, false, &ParseError{Field: fi.name, Token: item, Reason: `"L" needs a day before it here, such as 5L (the last Friday)`}
		}
		if len(up) > 1 && up[len(up)-1] == 'L' {
			w, err := c.value(k, item[:len(item)-1], item)
			if err != nil {
				return 0, false, err
			}
			c.dowL |= 1 << (w % 7)
			return 0, true, nil
		}
	}
	rng, stepText, hasStep := strings.Cut(item, "/")
	step := 1
	if hasStep {
		n, ok := number(stepText)
		if !ok {
			return 0, false, &ParseError{Field: fi.name, Token: item, Reason: fmt.Sprintf("invalid step %q in %q", stepText, item)}
		}
		if n < 1 || n > fi.max {
			return 0, false, &ParseError{Field: fi.name, Token: item, Reason: fmt.Sprintf("step %s is out of range [1,%d]", stepText, fi.max)}
		}
		step = n
	}
	var lo, hi int
	if rng == "*" {
		lo, hi = fi.min, fi.max
		if k == fDow {
			hi = 6
		}
	} else {
		loText, hiText, isRange := strings.Cut(rng, "-")
		if lo, err = c.value(k, loText, item); err != nil {
			return 0, false, err
		}
		switch {
		case isRange:
			if hi, err = c.value(k, hiText, item); err != nil {
				return 0, false, err
			}
			if k == fDow && hi == 0 && lo > 0 {
				hi = 7 // SAT-SUN
			}
			if hi < lo {
				return 0, false, &ParseError{Field: fi.name, Token: item, Reason: fmt.Sprintf("range %s runs backwards", rng)}
			}
		case hasStep:
			hi = fi.max
			if k == fDow {
				hi = 6
			}
		default:
			hi = lo
		}
	}
	return rangeBits(lo, hi, step), false, nil
}

// value reads a number or, in the month and day-of-week fields, a name.
func (c *CronSchedule) value(k fieldKind, text, item string) (int, error) {
	fi := &fieldInfos[k]
	if text == "" {
		return 0, &ParseError{Field: fi.name, Token: item, Reason: fmt.Sprintf("missing value in %q", item)}
	}
	if n, ok := number(text); ok {
		if n < fi.min || n > fi.max {
			return 0, &ParseError{Field: fi.name, Token: text, Reason: fmt.Sprintf("%s is out of range [%d,%d]", text, fi.min, fi.max)}
		}
		return n, nil
	}
	if isDigits(text) {
		return 0, &ParseError{Field: fi.name, Token: text, Reason: fmt.Sprintf("%s is out of range [%d,%d]", text, fi.min, fi.max)}
	}
	if fi.names != nil {
		if n, ok := fi.names[asciiUpper(text)]; ok {
			return n, nil
		}
		return 0, &ParseError{Field: fi.name, Token: text, Reason: fmt.Sprintf("unknown name %q", text)}
	}
	return 0, &ParseError{Field: fi.name, Token: text, Reason: fmt.Sprintf("invalid value %q", text)}
}

// asciiUpper upper-cases ASCII letters only, so that byte offsets in the
// result are those of s.
func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// number reads a small unsigned decimal number.
func number(s string) (int, bool) {
	if !isDigits(s) {
		return 0, false
	}
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	if len(s) > 4 {
		return 0, false
	}
	n, _ := strconv.Atoi(s)
	return n, true
}

func rangeBits(lo, hi, step int) uint64 {
	var b uint64
	for v := lo; v <= hi; v += step {
		b |= 1 << v
	}
	return b
}

func (c *CronSchedule) finish() {
	for w1 := 0; w1 < 7; w1++ {
		var m uint32
		for d := 1; d <= 31; d++ {
			if c.dow&(1<<((w1+d-1)%7)) != 0 {
				m |= 1 << d
			}
		}
		c.dowByFirst[w1] = m
	}
	c.wall = c.hour == 1<<24-1
	// An unrestricted day field whose plain values cover every day matches
	// every day, whatever else it lists: it is the same as *.
	if c.domStar != 0 && c.dom == 1<<32-2 {
		c.domAny, c.domStar, c.domL, c.domW, c.domLW = true, 1, 0, 0, false
	}
	if c.dowStar != 0 && c.dow == 1<<7-1 {
		c.dowAny, c.dowStar, c.dowL, c.dowHash = true, 1, 0, [6]uint8{}
	}
}

// possible reports whether some day of the 400-year Gregorian cycle, after
// which weekdays and leap years repeat, matches the day and month fields.
func (c *CronSchedule) possible() bool {
	for y := 2000; y < 2400; y++ {
		for m := 1; m <= 12; m++ {
			if c.month&(1<<m) != 0 && c.dayMask(y, m) != 0 {
				return true
			}
		}
	}
	return false
}

// Location returns the time zone the schedule is read in.
func (c *CronSchedule) Location() *time.Location {
	if c == nil || c.loc == nil {
		return time.UTC
	}
	return c.loc
}

// String returns the expression in canonical form: a CRON_TZ= prefix when
// the location is not UTC, then @every with its duration, or the fields as
// numbers (the seconds field only when it is not just 0). Parsing the result
// gives an equal schedule, provided the location was loaded by name.
func (c *CronSchedule) String() string {
	if c == nil || c.loc == nil {
		return ""
	}
	var b strings.Builder
	if c.loc != time.UTC {
		b.WriteString("CRON_TZ=")
		b.WriteString(c.loc.String())
		b.WriteByte(' ')
	}
	if c.every > 0 {
		b.WriteString("@every ")
		b.WriteString(c.every.String())
		return b.String()
	}
	if c.sec != 1 {
		b.WriteString(formatBits(c.sec, 0, 59, true))
		b.WriteByte(' ')
	}
	b.WriteString(formatBits(c.min, 0, 59, true))
	b.WriteByte(' ')
	b.WriteString(formatBits(uint64(c.hour), 0, 23, true))
	b.WriteByte(' ')
	if c.domAny {
		b.WriteByte('*')
	} else {
		var items []string
		dom := uint64(c.dom)
		if c.domStar != 0 {
			items = append(items, "*/"+strconv.Itoa(int(c.domStar)))
			dom &^= rangeBits(1, 31, int(c.domStar))
		}
		if dom != 0 {
			items = append(items, formatBits(dom, 1, 31, false))
		}
		for l := c.domL; l != 0; l &= l - 1 {
			if n := bits.TrailingZeros32(l); n == 0 {
				items = append(items, "L")
			} else {
				items = append(items, "L-"+strconv.Itoa(n))
			}
		}
		for ws := c.domW; ws != 0; ws &= ws - 1 {
			items = append(items, strconv.Itoa(bits.TrailingZeros32(ws))+"W")
		}
		if c.domLW {
			items = append(items, "LW")
		}
		b.WriteString(strings.Join(items, ","))
	}
	b.WriteByte(' ')
	b.WriteString(formatBits(uint64(c.month), 1, 12, true))
	b.WriteByte(' ')
	if c.dowAny {
		b.WriteByte('*')
	} else {
		var items []string
		dow := uint64(c.dow)
		if c.dowStar != 0 {
			items = append(items, "*/"+strconv.Itoa(int(c.dowStar)))
			dow &^= rangeBits(0, 6, int(c.dowStar))
		}
		if dow != 0 {
			items = append(items, formatBits(dow, 0, 6, false))
		}
		for ws := c.dowL; ws != 0; ws &= ws - 1 {
			items = append(items, strconv.Itoa(bits.TrailingZeros8(ws))+"L")
		}
		for k := 1; k <= 5; k++ {
			for ws := c.dowHash[k]; ws != 0; ws &= ws - 1 {
				items = append(items, strconv.Itoa(bits.TrailingZeros8(ws))+"#"+strconv.Itoa(k))
			}
		}
		b.WriteString(strings.Join(items, ","))
	}
	return b.String()
}

// formatBits writes a non-empty set of values in [lo,hi] compactly: "*" for
// all of them and "*/n" for a progression from lo (both only when star: in
// a day field a leading * changes the meaning), "a-b/n" for an arithmetic
// progression of three values or more, else a list of values and ranges.
func formatBits(b uint64, lo, hi int, star bool) string {
	all := rangeBits(lo, hi, 1)
	if b == all {
		if star {
			return "*"
		}
		return strconv.Itoa(lo) + "-" + strconv.Itoa(hi)
	}
	first := bits.TrailingZeros64(b)
	last := 63 - bits.LeadingZeros64(b)
	if n := bits.OnesCount64(b); n >= 3 {
		rest := b &^ (1 << first)
		step := bits.TrailingZeros64(rest) - first
		if step > 1 && rangeBits(first, last, step) == b {
			if star && first == lo && last+step > hi {
				return fmt.Sprintf("*/%d", step)
			}
			return fmt.Sprintf("%d-%d/%d", first, last, step)
		}
	}
	var parts []string
	for v := first; v <= last; {
		if b&(1<<v) == 0 {
			v++
			continue
		}
		e := v
		for e+1 <= last && b&(1<<(e+1)) != 0 {
			e++
		}
		switch {
		case e == v:
			parts = append(parts, strconv.Itoa(v))
		case e == v+1:
			parts = append(parts, strconv.Itoa(v), strconv.Itoa(e))
		default:
			parts = append(parts, strconv.Itoa(v)+"-"+strconv.Itoa(e))
		}
		v = e + 1
	}
	return strings.Join(parts, ",")
}
