package console

import (
	"cmp"
	"fmt"
	"html/template"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/ksana-dev/ksana/cron"
)

// --- paging back and forth ---

// maxPrev is the most cursors a page's "prev" stack keeps: a page
// further than that from the first links back to the first page, and
// shows no page number.
const maxPrev = 100

// maxCursorLen bounds one cursor of the stack.
const maxCursorLen = 300

// pager is the position of a page in a keyset-paged list: the cursor it
// starts after, and the stack of the cursors of the pages before it (the
// oldest first; the first page's, "", is not kept), carried in the query
// string as repeated prev parameters, so that a page links back.
type pager struct {
	After string
	Prev  []string
	Next  string // the cursor of the next page; "" when none follows
	Lost  bool   // the stack was cut at maxPrev: the page number is unknown
}

// parsePager reads after and prev from q; a cursor too long, or a stack
// without a cursor, is an error naming the parameter.
func parsePager(q url.Values) (pager, error) {
	p := pager{After: q.Get("after"), Prev: q["prev"]}
	if len(p.After) > maxCursorLen {
		return p, fmt.Errorf("after must be a cursor of at most %d characters", maxCursorLen)
	}
	if len(p.Prev) > 0 && p.After == "" {
		return p, fmt.Errorf("prev is only given with after (the cursor of the page)")
	}
	if len(p.Prev) > maxPrev {
		return p, fmt.Errorf("prev may be given at most %d times, got %d", maxPrev, len(p.Prev))
	}
	for _, c := range p.Prev {
		if c == "" || len(c) > maxCursorLen {
			return p, fmt.Errorf("prev must be cursors of 1 to %d characters, got %q", maxCursorLen, short(c, 40))
		}
	}
	if len(p.Prev) == maxPrev {
		p.Lost = true
	}
	return p, nil
}

// Number is the page's number, from 1; 0 when unknown.
func (p pager) Number() int {
	switch {
	case p.Lost:
		return 0
	case p.After == "":
		return 1
	}
	return len(p.Prev) + 2
}

// backValues sets the query of the previous page in v; false when this
// is the first page.
func (p pager) backValues(v url.Values) bool {
	if p.After == "" {
		return false
	}
	if n := len(p.Prev); n > 0 {
		v.Set("after", p.Prev[n-1])
		v["prev"] = slices.Clone(p.Prev[:n-1])
	}
	return true
}

// nextValues sets the query of the next page in v; false when none
// follows.
func (p pager) nextValues(v url.Values) bool {
	if p.Next == "" {
		return false
	}
	v.Set("after", p.Next)
	if p.After != "" {
		prev := append(slices.Clone(p.Prev), p.After)
		if len(prev) > maxPrev {
			prev = prev[len(prev)-maxPrev:]
		}
		v["prev"] = prev
	}
	return true
}

// --- sorting the jobs ---

// jobSorts are the orders of the jobs list (the sort parameter; a "-"
// before one reverses it), and how each compares two jobs. Ties keep
// the creation order.
var jobSorts = map[string]func(a, b *cron.Job) int{
	"id":   func(a, b *cron.Job) int { return strings.Compare(a.ID, b.ID) },
	"name": func(a, b *cron.Job) int { return cmp.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)) },
	"next": func(a, b *cron.Job) int {
		return cmpTimes(a.NextRunAt.UnixNano(), a.NextRunAt.IsZero(), b.NextRunAt.UnixNano(), b.NextRunAt.IsZero())
	},
	"last": func(a, b *cron.Job) int {
		return cmpTimes(a.LastRunAt.UnixNano(), a.LastRunAt.IsZero(), b.LastRunAt.UnixNano(), b.LastRunAt.IsZero())
	},
	"status": func(a, b *cron.Job) int { return cmp.Compare(statusRank(a.LastStatus), statusRank(b.LastStatus)) },
}

// sortNames are the sort parameter's values, for its error.
var sortNames = []string{"id", "name", "next", "last", "status"}

// cmpTimes orders times, a zero one (never) last.
func cmpTimes(a int64, az bool, b int64, bz bool) int {
	switch {
	case az && bz:
		return 0
	case az:
		return 1
	case bz:
		return -1
	}
	return cmp.Compare(a, b)
}

// statusRank orders the last statuses: the failures first.
func statusRank(s cron.Status) int {
	switch s {
	case cron.StatusFailed:
		return 0
	case cron.StatusTimeout:
		return 1
	case cron.StatusMissed:
		return 2
	case cron.StatusSkipped:
		return 3
	case cron.StatusPaused:
		return 4
	case cron.StatusSuccess:
		return 5
	}
	return 6 // never run
}

// parseSort checks the sort parameter: "" (creation order) or a name of
// jobSorts, with an optional "-" before it.
func parseSort(s string) error {
	if s == "" {
		return nil
	}
	if _, ok := jobSorts[strings.TrimPrefix(s, "-")]; !ok {
		return fmt.Errorf("sort must be one of %s, each with an optional - before it to reverse the order, got %q", strings.Join(sortNames, ", "), short(s, 40))
	}
	return nil
}

// sortJobs sorts jobs by order (a valid sort parameter), stably.
func sortJobs(jobs []cron.Job, order string) {
	by := jobSorts[strings.TrimPrefix(order, "-")]
	desc := strings.HasPrefix(order, "-")
	slices.SortStableFunc(jobs, func(a, b cron.Job) int {
		if desc {
			return by(&b, &a)
		}
		return by(&a, &b)
	})
}

// sortHeader is the link of a column's header in the jobs list: it
// sorts by col, or reverses the order when the list is sorted by col.
type sortHeader struct {
	Label string
	Href  template.URL // the query string
	Mark  string       // "▲", "▼" or ""
	Desc  bool         // the list is sorted by col, reversed
	On    bool         // the list is sorted by col
}

// header is the header link of column col labelled label, for the list
// of filter f sorted by cur.
func header(f filter, cur, col, label string) sortHeader {
	h := sortHeader{Label: label}
	next := col
	switch cur {
	case col:
		h.On, h.Mark, next = true, "▲", "-"+col
	case "-" + col:
		h.On, h.Desc, h.Mark = true, true, "▼"
	}
	v := f.values()
	v.Set("sort", next)
	h.Href = template.URL(v.Encode())
	return h
}

// pageNumber reads the page parameter of a sorted list: from 1 to
// maxPage; "" is 1.
func pageNumber(s string) (int, error) {
	if s == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxPage {
		return 0, fmt.Errorf("page must be a number from 1 to %d, got %q", maxPage, short(s, 40))
	}
	return n, nil
}

// maxPage bounds the page parameter.
const maxPage = 1_000_000

// pathQuery is path with the query v, when v has any parameter.
func pathQuery(path string, v url.Values) string {
	if q := v.Encode(); q != "" {
		return path + "?" + q
	}
	return path
}
