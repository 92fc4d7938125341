package cron

import (
	"math/bits"
	"time"
)

// Next returns the first run time strictly after after, in the schedule's
// location, or the zero time when there is none (a nil or zero schedule).
// Runs fall on whole seconds. See [CronSchedule] for daylight saving.
func (c *CronSchedule) Next(after time.Time) time.Time {
	if c == nil || c.loc == nil {
		return time.Time{}
	}
	if c.every > 0 {
		_, slot := gridFloor(c.origin, c.every, after)
		return slot.Add(c.every).In(c.loc)
	}
	if c.month == 0 {
		return time.Time{}
	}
	t := after.Unix() + 1       // the first whole second after after
	limit := civilYear(t) + 401 // beyond a whole Gregorian cycle: no run
	if c.loc == time.UTC {
		w, ok := c.nextWall(t, limit)
		if !ok {
			return time.Time{}
		}
		return time.Unix(w, 0).UTC()
	}
	// Walk the zone's periods of constant offset, searching each one's
	// wall-clock range.
	for {
		tt := time.Unix(t, 0).In(c.loc)
		_, off := tt.Zone()
		start, end := tt.ZoneBounds()
		if !end.IsZero() && end.Unix() <= t {
			// Beyond its transition table, Go extends a zone by yearly
			// rules and may report a period ending a day before the year
			// does (seen for leap years). No real transition falls at the
			// turn of the year: search up to it.
			end = time.Date(tt.UTC().Year()+1, 1, 1, 0, 0, 0, 0, time.UTC).In(c.loc)
			if end.Unix() <= t {
				end = time.Unix(t+86400, 0).In(c.loc)
			}
		}
		lo := t + int64(off) // wall-clock seconds
		if civilYear(lo) > limit {
			return time.Time{}
		}
		if !c.wall && !start.IsZero() && start.Unix() <= t {
			if _, prev := start.Add(-time.Nanosecond).Zone(); prev > off {
				// A fall-back began this period: the wall times up to
				// start+prev came already, in the previous period.
				if rep := start.Unix() + int64(prev); lo < rep {
					lo = rep
				}
			}
		}
		stop := limit
		if !end.IsZero() {
			stop = min(limit, civilYear(end.Unix()+int64(off))+1)
		}
		w, ok := c.nextWall(lo, stop)
		if !ok {
			if end.IsZero() || stop == limit {
				return time.Time{}
			}
			t = end.Unix()
			continue
		}
		cand := w - int64(off)
		if end.IsZero() || cand < end.Unix() {
			return time.Unix(cand, 0).In(c.loc)
		}
		if !c.wall {
			if _, nxt := end.Zone(); nxt > off && w < end.Unix()+int64(nxt) {
				// w falls in the gap of a spring-forward: run once, at
				// the first instant after it.
				return end
			}
		}
		t = end.Unix()
	}
}

// nextWall returns the first wall-clock second at or after from (seconds
// since 1970-01-01 00:00:00 on the wall) that matches the fields, giving up
// after year stop.
func (c *CronSchedule) nextWall(from int64, stop int) (int64, bool) {
	days := floorDiv(from, 86400)
	sod := int(from - days*86400)
	y, m, d := civilFromDays(days)
	h, mi, s := sod/3600, sod/60%60, sod%60
	my, mm := -1, -1
	var mask uint64
	for {
		if y > stop {
			return 0, false
		}
		if c.month&(1<<m) == 0 {
			rest := uint32(c.month) >> m << m
			if rest == 0 {
				y++
				rest = uint32(c.month)
			}
			m = bits.TrailingZeros32(rest)
			d, h, mi, s = 1, 0, 0, 0
			continue
		}
		if y != my || m != mm {
			mask, my, mm = c.dayMask(y, m), y, m
		}
		dm := mask >> d << d
		if dm == 0 {
			m++
			if m > 12 {
				m = 1
				y++
			}
			d, h, mi, s = 1, 0, 0, 0
			continue
		}
		if nd := bits.TrailingZeros64(dm); nd != d {
			d, h, mi, s = nd, 0, 0, 0
		}
		hm := c.hour >> h << h
		if hm == 0 {
			d, h, mi, s = d+1, 0, 0, 0
			continue
		}
		if nh := bits.TrailingZeros32(hm); nh != h {
			h, mi, s = nh, 0, 0
		}
		mn := c.min >> mi << mi
		if mn == 0 {
			h, mi, s = h+1, 0, 0
			continue
		}
		if nm := bits.TrailingZeros64(mn); nm != mi {
			mi, s = nm, 0
		}
		sm := c.sec >> s << s
		if sm == 0 {
			mi, s = mi+1, 0
			continue
		}
		s = bits.TrailingZeros64(sm)
		return daysFromCivil(y, m, d)*86400 + int64(h*3600+mi*60+s), true
	}
}

// dayMask returns the days (bits 1-31) of month m of year y that match the
// day fields.
func (c *CronSchedule) dayMask(y, m int) uint64 {
	dim := daysIn(y, m)
	valid := uint64(1)<<(dim+1) - 2
	if c.domAny && c.dowAny {
		return valid
	}
	w1 := weekday(daysFromCivil(y, m, 1))
	var domM, dowM uint64
	if !c.domAny {
		domM = uint64(c.dom)
		for l := c.domL; l != 0; l &= l - 1 {
			if n := bits.TrailingZeros32(l); n < dim {
				domM |= 1 << (dim - n)
			}
		}
		for ws := c.domW; ws != 0; ws &= ws - 1 {
			if d := bits.TrailingZeros32(ws); d <= dim {
				switch (w1 + d - 1) % 7 {
				case 6: // Saturday
					if d == 1 {
						d += 2
					} else {
						d--
					}
				case 0: // Sunday
					if d == dim {
						d -= 2
					} else {
						d++
					}
				}
				domM |= 1 << d
			}
		}
		if c.domLW {
			d := dim
			switch (w1 + dim - 1) % 7 {
			case 6:
				d--
			case 0:
				d -= 2
			}
			domM |= 1 << d
		}
		domM &= valid
	}
	if !c.dowAny {
		dowM = uint64(c.dowByFirst[w1])
		if c.dowL != 0 {
			wl := (w1 + dim - 1) % 7
			for ws := c.dowL; ws != 0; ws &= ws - 1 {
				w := bits.TrailingZeros8(ws)
				dowM |= 1 << (dim - (wl-w+7)%7)
			}
		}
		for k := 1; k <= 5; k++ {
			for ws := c.dowHash[k]; ws != 0; ws &= ws - 1 {
				w := bits.TrailingZeros8(ws)
				if d := 1 + (w-w1+7)%7 + 7*(k-1); d <= dim {
					dowM |= 1 << d
				}
			}
		}
		dowM &= valid
	}
	if c.domAny {
		domM = valid
	}
	if c.dowAny {
		dowM = valid
	}
	if c.domStar != 0 || c.dowStar != 0 {
		return domM & dowM
	}
	return domM | dowM
}
