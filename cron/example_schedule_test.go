package cron_test

import (
	"fmt"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

func ExampleParseCron() {
	s, err := cron.ParseCron("CRON_TZ=Europe/Berlin 30 9 * * MON-FRI")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s)
	t := time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC) // a Friday
	for range 3 {
		t = s.Next(t)
		fmt.Println(t.Format("Mon 2006-01-02 15:04 MST"))
	}

	_, err = cron.ParseCron("0 25 * * *")
	fmt.Println(err)
	// Output:
	// CRON_TZ=Europe/Berlin 30 9 * * 1-5
	// Mon 2026-03-30 09:30 CEST
	// Tue 2026-03-31 09:30 CEST
	// Wed 2026-04-01 09:30 CEST
	// cron: hour field: 25 is out of range [0,23]
}

func ExampleEvery() {
	spec := cron.Every(5 * time.Minute)
	spec.StartAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// A run that ends late does not shift the grid.
	runEnd := spec.StartAt.Add(7 * time.Minute)
	next, err := spec.Next(runEnd, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(next[0].Format(time.RFC3339))
	// Output:
	// 2026-01-01T00:10:00Z
}

func ExampleScheduleSpec_Next() {
	spec := cron.ScheduleSpec{Kind: cron.KindCron, Cron: "0 9 * * MON-FRI", TZ: "Europe/Paris"}
	after := time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC) // a Friday; summer time starts on Sunday
	times, err := spec.Next(after, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range times {
		fmt.Println(t.Format(time.RFC3339))
	}

	_, err = cron.Every(time.Hour).Next(after, 0)
	fmt.Println(err)
	// Output:
	// 2026-03-30T07:00:00Z
	// 2026-03-31T07:00:00Z
	// 2026-04-01T07:00:00Z
	// cron: invalid job: n: must be from 1 to 1000, got 0
}
