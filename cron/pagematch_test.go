package cron_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/cron"
)

func TestPageMatching(t *testing.T) {
	r, err := cron.New(nil, cron.ExecutorFunc(func(context.Context, *cron.Job, cron.RunInfo) cron.Result { return cron.Result{} }), cron.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		j := cron.Job{ID: fmt.Sprintf("j%d", i), Name: fmt.Sprintf("Report %d", i), Schedule: cron.Every(time.Hour),
			HTTP: cron.HTTPConfig{URL: "https://example.com"}}
		if i%2 == 1 {
			j.Schedule = cron.Cron("0 3 * * *")
		}
		if _, err := r.Add(context.Background(), j); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(jobs []cron.Job) []string {
		var out []string
		for _, j := range jobs {
			out = append(out, j.ID)
		}
		return out
	}
	seen := 0
	every := func(j *cron.Job) bool { seen++; return j.Schedule.Kind == cron.KindEvery }
	tests := []struct {
		after, text string
		limit       int
		keep        func(*cron.Job) bool
		want        []string
		wantMore    bool
		wantSeen    int // the jobs keep saw: only those whose id or name holds text
	}{
		{text: "REPORT 1", want: []string{"j1"}},
		{text: "j", limit: 3, want: []string{"j0", "j1", "j2"}, wantMore: true},
		{after: "j2", text: "j", limit: 3, want: []string{"j3", "j4", "j5"}, wantMore: true},
		{text: "report", keep: every, want: []string{"j0", "j2", "j4", "j6", "j8"}, wantSeen: 10},
		{text: "port 3", keep: every, wantSeen: 1},
		{text: "", limit: 2, want: []string{"j0", "j1"}, wantMore: true},
		{text: "nothing"},
	}
	for _, tt := range tests {
		seen = 0
		got, more, err := r.List(context.Background(), cron.JobQuery{After: tt.after, Limit: tt.limit, Text: tt.text, Keep: tt.keep})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, ids(got)); diff != "" || more != tt.wantMore || seen != tt.wantSeen {
			t.Errorf("List(%q, %d, %q): more %v (want %v), keep saw %d (want %d), ids (-want +got):\n%s",
				tt.after, tt.limit, tt.text, more, tt.wantMore, seen, tt.wantSeen, diff)
		}
	}
}
