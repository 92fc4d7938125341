package cron

import "testing"

func TestContainsFold(t *testing.T) {
	for _, tt := range []struct {
		s, sub string
		want   bool
	}{
		{"Nightly Report", "report", true}, {"Nightly Report", "NIGHT", true}, {"abc", "", true},
		{"abc", "abcd", false}, {"ÉTÉ été", "été", true}, {"report", "rx", false}, {"a-b", "-B", true},
		{"team 13", "TEAM 13", true}, {"team 1", "team 13", false}, {"x", "X", true}, {"", "a", false},
	} {
		if got := containsFold(tt.s, tt.sub); got != tt.want {
			t.Errorf("containsFold(%q, %q) = %v, want %v", tt.s, tt.sub, got, tt.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { containsFold("Report 123 for Team 13", "team 13") }); n != 0 {
		t.Errorf("containsFold allocates %v times a call, want 0", n)
	}
}
