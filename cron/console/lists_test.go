package console

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// jobOrder returns the ids of the jobs of a jobs page, in its order.
func jobOrder(body string) []string {
	var ids []string
	for _, m := range jobRowRE.FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

var jobRowRE = regexp.MustCompile(`<div class="muted small">([^<]+)</div></td>\s*<td>`)

// link returns the href of the element with id in body, unescaped.
func link(body, id string) string {
	m := regexp.MustCompile(`href="([^"]*)"[^>]*id="` + id + `"`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

func TestJobsSortAndTotals(t *testing.T) {
	f := newFixture(t, fixtureOpts{auth: true, console: Config{PageSize: 2}})
	now := time.Now()
	for i, name := range []string{"delta", "Alpha", "charlie", "bravo", "echo"} {
		f.add(t, cron.Job{ID: fmt.Sprintf("j%d", i), Name: name, Schedule: cron.At(now.Add(time.Duration(5-i) * time.Hour))})
	}
	if _, err := f.runner.Pause(context.Background(), "j4", time.Time{}); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{viewerToken, operatorToken, adminToken} {
		b := f.browser(t)
		b.login(tok)
		for _, tc := range []struct {
			query string
			want  []string
		}{
			{"sort=name", []string{"j1", "j3"}},
			{"sort=name&page=2", []string{"j2", "j0"}},
			{"sort=name&page=3", []string{"j4"}},
			{"sort=-name", []string{"j4", "j0"}},
			{"sort=id", []string{"j0", "j1"}},
			{"sort=-id&page=3", []string{"j0"}},
			{"sort=next", []string{"j3", "j2"}}, // j4 is paused: no next run, last
			{"sort=-next", []string{"j4", "j0"}},
			{"sort=status&enabled=true", []string{"j0", "j1"}},
		} {
			code, body, _ := b.get("/jobs?" + tc.query)
			if code != http.StatusOK {
				t.Fatalf("GET /jobs?%s: %d\n%s", tc.query, code, body)
			}
			if got := jobOrder(body); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("GET /jobs?%s with %s: %v, want %v", tc.query, tok, got, tc.want)
			}
		}
		_, body, _ := b.get("/jobs?sort=name&page=2")
		for _, want := range []string{`id="totals">5 jobs, 1 paused<`, "page 2 of 3", `aria-current="page">2<`, `rel="prev"`, `rel="next"`, `aria-sort="ascending"`} {
			if !strings.Contains(body, want) {
				t.Errorf("sorted page 2 lacks %q\n%s", want, body)
			}
		}
		if got := link(body, "prev-page"); got != "/jobs-ui/jobs?sort=name" {
			t.Errorf("previous page: %q", got)
		}
		if _, body, _ := b.get("/jobs?sort=-name"); !strings.Contains(body, `aria-sort="descending"`) || !strings.Contains(body, "▼") {
			t.Error("a reversed sort is not marked on its column")
		}
		if _, body, _ := b.get("/jobs?enabled=true"); !strings.Contains(body, `id="totals">4 jobs match, 0 paused<`) {
			t.Errorf("filtered totals:\n%s", body)
		}
	}
}

func TestJobsPagingBack(t *testing.T) {
	f := newFixture(t, fixtureOpts{console: Config{PageSize: 2}})
	for i := range 5 {
		f.add(t, cron.Job{ID: fmt.Sprintf("p%d", i)})
	}
	b := f.browser(t)
	_, body, _ := b.get("/jobs")
	if !strings.Contains(body, `id="totals">5 jobs, 0 paused<`) || !strings.Contains(body, "page 1") || strings.Contains(body, `id="prev-page"`) {
		t.Fatalf("first page:\n%s", body)
	}
	var pages [][]string
	for next := "/jobs"; next != ""; {
		_, body, _ := b.get(next)
		pages = append(pages, jobOrder(body))
		if want := fmt.Sprintf("page %d", len(pages)); !strings.Contains(body, want) {
			t.Errorf("%s lacks %q", next, want)
		}
		next = strings.TrimPrefix(link(body, "next-page"), "/jobs-ui")
		if len(pages) == 3 {
			// Back from the last page, page by page.
			back := strings.TrimPrefix(link(body, "prev-page"), "/jobs-ui")
			_, b2, _ := b.get(back)
			if got := jobOrder(b2); fmt.Sprint(got) != "[p2 p3]" {
				t.Errorf("back to page 2 (%s): %v", back, got)
			}
			back = strings.TrimPrefix(link(b2, "prev-page"), "/jobs-ui")
			_, b1, _ := b.get(back)
			if got := jobOrder(b1); fmt.Sprint(got) != "[p0 p1]" || back != "/jobs" {
				t.Errorf("back to page 1 (%s): %v", back, got)
			}
		}
	}
	if fmt.Sprint(pages) != "[[p0 p1] [p2 p3] [p4]]" {
		t.Errorf("pages: %v", pages)
	}
}

func TestJobsListBadParameters(t *testing.T) {
	f := newFixture(t, fixtureOpts{auth: true})
	f.add(t, cron.Job{ID: "j"})
	for _, tok := range []string{viewerToken, operatorToken, adminToken} {
		b := f.browser(t)
		b.login(tok)
		for _, tc := range []struct{ query, want string }{
			{"sort=colour", "sort must be one of id, name, next, last, status"},
			{"sort=%3Cscript%3Ealert(1)%3C%2Fscript%3E", "sort must be one of"},
			{"sort=name&page=0", "page must be a number from 1"},
			{"sort=name&page=abc", "page must be a number from 1"},
			{"sort=name&page=7", "page 7 is past the last page, 1"},
			{"sort=name&after=j", "a sorted list pages with page"},
			{"page=2", "page is only given with sort"},
			{"prev=j", "prev is only given with after"},
			{"after=j&prev=", "prev must be cursors"},
			{"after=" + strings.Repeat("x", 400), "after must be a cursor"},
			{"after=%3Cb%3Egone", "start again from the first page"},
		} {
			code, body, _ := b.get("/jobs?" + tc.query)
			if code != http.StatusBadRequest || !strings.Contains(body, `id="error"`) || !strings.Contains(body, html.EscapeString(tc.want)) {
				t.Errorf("GET /jobs?%s with %s: %d, want 400 saying %q\n%s", tc.query, tok, code, tc.want, body)
			}
			if strings.Contains(body, "<script>alert") || strings.Contains(body, "<b>gone") {
				t.Errorf("GET /jobs?%s: a parameter is not escaped", tc.query)
			}
		}
	}
}

func TestRunsPagingBack(t *testing.T) {
	st := cron.NewMemStore()
	f := newFixture(t, fixtureOpts{store: st})
	for i := range 3 {
		f.add(t, cron.Job{ID: fmt.Sprintf("j%d", i)})
	}
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := range runsPageSize*2 + 5 {
		if err := st.AppendRun(context.Background(), cron.Run{ID: fmt.Sprintf("r%03d", i), JobID: fmt.Sprintf("j%d", i%3), ScheduledAt: t0.Add(time.Duration(i) * time.Second),
			TriggeredAt: t0.Add(time.Duration(i) * time.Second), Status: cron.StatusSuccess, Attempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	b := f.browser(t)
	_, p1, _ := b.get("/runs")
	next := strings.TrimPrefix(link(p1, "next-page"), "/jobs-ui")
	_, p2, _ := b.get(next)
	next = strings.TrimPrefix(link(p2, "next-page"), "/jobs-ui")
	code, p3, _ := b.get(next)
	if code != http.StatusOK || strings.Count(p3, `class="run"`) != 5 || !strings.Contains(p3, "page 3") || strings.Contains(p3, `id="next-page"`) {
		t.Fatalf("page 3 (%s): %d\n%s", next, code, p3)
	}
	back := strings.TrimPrefix(link(p3, "prev-page"), "/jobs-ui")
	if _, body, _ := b.get(back); body != p2 && !strings.Contains(body, "page 2") {
		t.Errorf("back from page 3 (%s) is not page 2", back)
	}
	back2 := strings.TrimPrefix(link(p2, "prev-page"), "/jobs-ui")
	if back2 != "/runs" {
		t.Errorf("back from page 2: %q, want /runs", back2)
	}
	for _, q := range []string{"after=junk", "prev=x", "after=" + strings.Repeat("9", 400)} {
		if code, body, _ := b.get("/runs?" + q); code != http.StatusBadRequest || !strings.Contains(body, `id="error"`) {
			t.Errorf("GET /runs?%s: %d, want 400", q, code)
		}
	}
}
