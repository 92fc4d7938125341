package cron

import (
	"time"
)

// gridFloor returns the last point origin + k*d (d > 0) at or before t, and
// its index k. It is exact for any times; far from the origin (beyond 146
// years) it steps there by 73-year chunks.
func gridFloor(origin time.Time, d time.Duration, t time.Time) (int64, time.Time) {
	const maxD = time.Duration(1<<63 - 1)
	var k int64
	diff := t.Sub(origin)
	if diff <= -maxD/2 || diff >= maxD/2 {
		// Far from the origin (or beyond what a Duration holds): move the
		// origin by whole multiples of d first.
		chunk := (maxD / 4 / d) * d
		if chunk == 0 {
			chunk = d
		}
		per := int64(chunk / d)
		for diff <= -maxD/2 || diff >= maxD/2 {
			if diff > 0 {
				origin = origin.Add(chunk)
				k += per
			} else {
				origin = origin.Add(-chunk)
				k -= per
			}
			diff = t.Sub(origin)
		}
	}
	q := int64(diff / d)
	if diff%d < 0 {
		q--
	}
	return k + q, origin.Add(time.Duration(q) * d)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// civilYear returns the year of wall-clock second w.
func civilYear(w int64) int {
	y, _, _ := civilFromDays(floorDiv(w, 86400))
	return y
}

// daysFromCivil returns the days since 1970-01-01 of a proleptic Gregorian
// date (H. Hinnant's algorithm).
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

// civilFromDays is the inverse of daysFromCivil.
func civilFromDays(z int64) (y, m, d int) {
	z += 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := int(z - era*146097)
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	m = mp + 3
	if m > 12 {
		m -= 12
	}
	y = yoe + int(era)*400
	if m <= 2 {
		y++
	}
	return y, m, d
}

// weekday returns the weekday (0 = Sunday) of a day counted from 1970-01-01,
// a Thursday.
func weekday(days int64) int {
	w := (days + 4) % 7
	if w < 0 {
		w += 7
	}
	return int(w)
}

func daysIn(y, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
