package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/client"
	"github.com/ksana-dev/ksana/cron/httpapi"
)

func Example() {
	// A service to talk to: the API of an in-memory runner. A real one is
	// cmd/ksana, at http://127.0.0.1:7100.
	r, _ := cron.New(nil, nil, cron.Config{})
	api, _ := httpapi.New(r, httpapi.Config{Token: "s3cret-token-0001"})
	srv := httptest.NewServer(api)
	defer srv.Close()

	ctx := context.Background()
	c, err := client.New(srv.URL, srv.Client(), "s3cret-token-0001")
	if err != nil {
		fmt.Println(err)
		return
	}
	spec := cron.ScheduleSpec{Kind: cron.KindCron, Cron: "30 9 * * MON-FRI", TZ: "Europe/Berlin"}
	j, err := c.Create(ctx, cron.Job{ID: "report", HTTP: cron.HTTPConfig{URL: "https://api.example.com/report"}, Schedule: spec})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("created", j.ID, j.Schedule.Cron, j.Schedule.TZ)

	// The API's refusals name the field at fault.
	_, err = c.Create(ctx, cron.Job{ID: "bad", HTTP: cron.HTTPConfig{URL: "https://api.example.com/"}, Schedule: cron.Cron("0 25 * * *")})
	var ae *client.APIError
	if errors.As(err, &ae) {
		fmt.Println(ae.Status, ae.Field, errors.Is(err, cron.ErrInvalidJob))
	}
	_, err = c.Get(ctx, "nope")
	fmt.Println(errors.Is(err, cron.ErrNotFound))

	// A schedule's next times, without a job.
	every := cron.Every(6 * time.Hour)
	every.StartAt = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	times, err := c.Preview(ctx, every, 3, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range times {
		fmt.Println(t.Format(time.RFC3339))
	}
	// Output:
	// created report 30 9 * * MON-FRI Europe/Berlin
	// 400 schedule.cron true
	// true
	// 2100-01-01T00:00:00Z
	// 2100-01-01T06:00:00Z
	// 2100-01-01T12:00:00Z
}
