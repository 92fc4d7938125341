package cron

import (
	"errors"
	"time"
)

// CronSchedule is a parsed cron expression.
// (Placeholder: the parser replaces this file.)
type CronSchedule struct{ spec string }

// Next implements Schedule.
func (c *CronSchedule) Next(after time.Time) time.Time { return time.Time{} }

// String returns the expression in canonical form.
func (c *CronSchedule) String() string { return c.spec }

// CronOption configures ParseCron.
type CronOption func(*cronOptions)

type cronOptions struct{ loc *time.Location }

// WithLocation sets the time zone the expression is read in (default UTC),
// unless the expression carries its own CRON_TZ= or TZ= prefix.
func WithLocation(loc *time.Location) CronOption { return func(o *cronOptions) { o.loc = loc } }

// ParseCron parses a cron expression.
func ParseCron(spec string, opts ...CronOption) (*CronSchedule, error) {
	return nil, errors.New("cron: expressions not implemented yet")
}
