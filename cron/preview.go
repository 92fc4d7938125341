package cron

import (
	"context"
	"fmt"
	"time"
)

// times returns the first n run times of s strictly after after, in UTC:
// fewer when the schedule ends first (a once schedule has at most one),
// none when n <= 0.
func times(s Schedule, after time.Time, n int) []time.Time {
	out := make([]time.Time, 0, min(max(n, 0), 64))
	for t := after; len(out) < n; {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t.UTC())
	}
	return out
}

// Next checks s ([ScheduleSpec.Validate]) and returns its first n run
// times strictly after after, in UTC; a cron schedule is computed in its
// time zone (TZ, or a CRON_TZ= prefix). An every schedule without
// StartAt starts at after, as a job added then would, and its jitter, if
// any, is spread with seed 0 (a job's is spread with seedFor of its id:
// see [Runner.Next]). n must be from 1 to [MaxPreview]; the error is a
// *[ValidationError] naming "n" or the schedule's bad field.
func (s ScheduleSpec) Next(after time.Time, n int) ([]time.Time, error) {
	return s.next(after, n, 0, Rules{MinInterval: -1})
}

// next is Next with a jitter seed and the rules' minimum interval.
func (s ScheduleSpec) next(after time.Time, n int, seed uint64, rules Rules) ([]time.Time, error) {
	if n < 1 || n > MaxPreview {
		return nil, invalid("n", "must be from 1 to %d, got %d", MaxPreview, n)
	}
	s.RunAt = utc(s.RunAt)
	s.StartAt = utc(s.StartAt)
	if s.Kind == KindEvery && s.StartAt.IsZero() {
		s.StartAt = after.UTC()
	}
	c, err := s.check(nil)
	if err != nil {
		return nil, err
	}
	if err := rules.checkInterval(&s, c); err != nil {
		return nil, err
	}
	sched, err := s.build(c, seed)
	if err != nil {
		return nil, err
	}
	return times(sched, after, n), nil
}

// build is Build with the cron expression already parsed (c, for a cron
// schedule).
func (s *ScheduleSpec) build(c *CronSchedule, seed uint64) (Schedule, error) {
	if s.Kind == KindCron && c != nil {
		return c, nil
	}
	return s.Build(seed)
}

// checkInterval refuses an every interval, or the @every of a cron
// expression (c), below the rules' minimum.
func (d Rules) checkInterval(s *ScheduleSpec, c *CronSchedule) error {
	min := d.minInterval()
	if min <= 0 {
		return nil
	}
	if s.Kind == KindEvery && s.Every.D() < min {
		return invalid("schedule.every", "must be at least %s, got %s", min, s.Every)
	}
	if c != nil && c.every > 0 && c.every < min {
		return invalid("schedule.cron", "@every must be at least %s, got %s", min, c.every)
	}
	return nil
}

// Preview checks spec as [Runner.Add] checks a job's schedule (with the
// runner's [Config.MinInterval]) and returns its first n run times after
// now, in UTC, without adding a job. id, when not empty, is the id of the
// job the schedule is meant for: it must be a valid id ([Job].ID), and an
// every schedule's jitter is spread as that job's would be; with id "",
// with seed 0. A once schedule whose run_at has passed lists no time. n
// must be from 1 to [MaxPreview]. The error is a *[ValidationError]
// naming the bad field ("n", "id", "schedule.every", ...).
func (r *Runner) Preview(spec ScheduleSpec, id string, n int) ([]time.Time, error) {
	var seed uint64
	if id != "" {
		if err := validID(id); err != nil {
			return nil, err
		}
		seed = seedFor(id)
	}
	return spec.next(r.now(), n, seed, r.rules())
}

// Next returns the next n run times of job id after now, in UTC, and the
// job (for its paused state and schedule): the
// times its schedule gives, whether or not the job is paused (a paused
// job fires none of them until it is resumed). A cron schedule is
// computed in its time zone; an every schedule's jitter is the job's own.
// A once job that has run lists no time. n must be from 1 to
// [MaxPreview] (a *[ValidationError] naming "n"); an unknown id is
// [ErrNotFound]. Over a [SharedStore], the job is read with ctx as
// [Runner.Get] reads it.
func (r *Runner) Next(ctx context.Context, id string, n int) ([]time.Time, Job, error) {
	if n < 1 || n > MaxPreview {
		return nil, Job{}, invalid("n", "must be from 1 to %d, got %d", MaxPreview, n)
	}
	j, err := r.Get(ctx, id)
	if err != nil {
		return nil, Job{}, err
	}
	// A stored job is not held to the minimum interval: it was accepted
	// before, and runs as it is.
	times, err := j.Schedule.next(r.now(), n, seedFor(j.ID), Rules{MinInterval: -1})
	if err != nil {
		return nil, j, fmt.Errorf("cron: job %q: %w", id, err)
	}
	return times, j, nil
}

// rules are the [Rules] the runner applies to a job it adds.
func (r *Runner) rules() Rules {
	return Rules{Timeout: r.cfg.DefaultTimeout, RetryBackoff: r.cfg.DefaultRetryBackoff, MinInterval: r.cfg.MinInterval}
}
