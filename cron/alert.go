package cron

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
)

// AlertConfig names the webhook that is told when a job's health changes,
// and when: a POST of an [Alert] as JSON on the first failure (failing),
// on After failures in a row (failing_streak), on the first success after
// alerted failures (recovered), and, when PauseAfter > 0, on PauseAfter
// failures in a row, when the runner also pauses the job (paused). A run
// that fails is one that ends failed or timeout; skipped, missed and
// paused slots leave the health as it was. An alert is sent once per
// change: the count of failures in a row and the last transition alerted
// are kept with the job's bookkeeping, across restarts.
type AlertConfig struct {
	// URL is the webhook, an absolute http or https URL. Empty on a job:
	// the runner's [Config.Alert] URL and secret, with this job's After
	// and PauseAfter.
	URL string `json:"url,omitempty"`
	// Secret keys the HMAC-SHA256 signature of each alert (see
	// [SignAlert]); at most [MaxAlertSecretLen] bytes. Empty: unsigned.
	Secret string `json:"secret,omitempty"`
	// After is the failures in a row that raise failing_streak. Default
	// (0) [DefaultAlertAfter]; 1 sends failing only.
	After int `json:"after,omitempty"`
	// PauseAfter, when positive, pauses the job (durably, as a pause
	// through the API does) once it has failed that many times in a row,
	// and alerts paused. Default 0: never.
	PauseAfter int `json:"pause_after,omitempty"`
	// MissedEvery is the least time between two missed alerts of a job
	// (see [AlertMissed]): the slots recorded missed sooner after one
	// are not alerted. Default (0) [DefaultAlertMissedEvery]; negative:
	// no missed alerts.
	MissedEvery Duration `json:"missed_every,omitempty"`
	// Notify asks for an alert of each run beside the transitions: "" (the
	// default) alerts the transitions only; "failure" also each failed or
	// timed-out run that is no transition; "always" also each run that is
	// none, successes included. Such an alert's transition is [AlertRun];
	// it leaves the job's health and last_alert as they were.
	Notify string `json:"notify,omitempty"`
}

// validate checks c as the alert of a job (job: the URL may be empty) or
// of a runner, and names the bad field under prefix.
func (c *AlertConfig) validate(prefix string, job bool) error {
	if c.URL != "" || !job {
		if err := validateURL(prefix+".url", c.URL); err != nil {
			return err
		}
	}
	if len(c.Secret) > MaxAlertSecretLen {
		return invalid(prefix+".secret", "must be at most %d bytes, got %d", MaxAlertSecretLen, len(c.Secret))
	}
	if c.After < 0 {
		return invalid(prefix+".after", "must be >= 1 (0 means %d), got %d", DefaultAlertAfter, c.After)
	}
	if c.PauseAfter < 0 {
		return invalid(prefix+".pause_after", "must be >= 0 (0: never pause), got %d", c.PauseAfter)
	}
	switch c.Notify {
	case "", notifyFailure, notifyAlways:
	default:
		return invalid(prefix+".notify", "must be %q, %q or empty (transitions only), got %q", notifyFailure, notifyAlways, c.Notify)
	}
	return nil
}

// The values of [AlertConfig.Notify].
const (
	notifyFailure = "failure"
	notifyAlways  = "always"
)

// notifies reports whether a run that ended with status and raised no
// transition is alerted under c ([AlertConfig.Notify]).
func (c *AlertConfig) notifies(status Status) bool {
	switch c.Notify {
	case notifyAlways:
		return status == StatusSuccess || status == StatusFailed || status == StatusTimeout
	case notifyFailure:
		return status == StatusFailed || status == StatusTimeout
	}
	return false
}

// same reports whether c and d are equal (both nil included).
func (c *AlertConfig) same(d *AlertConfig) bool {
	if c == nil || d == nil {
		return c == d
	}
	return *c == *d
}

// Alert is the JSON body of an alert request.
type Alert struct {
	// Transition is failing, failing_streak, recovered, paused, missed
	// or run.
	Transition string `json:"transition"`
	// Job identifies the job: its id, name and type.
	Job struct {
		ID   string `json:"id"`
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"job"`
	// Run is the run that changed the job's health.
	Run Run `json:"run"`
	// Error is the run's error ("" for recovered).
	Error string `json:"error,omitempty"`
	// ConsecutiveFailures is the failures in a row, this run included (0
	// for recovered).
	ConsecutiveFailures int `json:"consecutive_failures"`
	// Time is when the alert was made (RFC3339, UTC).
	Time time.Time `json:"time"`
}

// AlertObserver is an optional capability of a [Config.Observer]: it is
// told of each alert once its delivery is over (delivered, or dead: see
// [Config.AlertHorizon]), with the attempts made and the last error (nil:
// delivered). It is called from the goroutine that made the last
// attempt; over a shared store, on the runner that made it.
type AlertObserver interface {
	AlertDelivered(a Alert, attempts int, err error)
}

// SignAlert returns the value of the [AlertSignatureHeader] of an alert
// with body, signed at timestamp (the value of its
// [AlertTimestampHeader]): "sha256=" and the hex HMAC-SHA256, keyed by
// secret, of timestamp + "." + body.
func SignAlert(secret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// VerifyAlert checks the signature of an alert request as its receiver
// got it: the headers h and the raw body. It returns an error wrapping
// [ErrAlertSignature] when the signature is missing or wrong, or when the
// timestamp is more than maxAge away from now (maxAge <= 0: not checked),
// which refuses a replay of an old alert.
func VerifyAlert(secret string, h http.Header, body []byte, now time.Time, maxAge time.Duration) error {
	ts := h.Get(AlertTimestampHeader)
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not a Unix time", ErrAlertSignature, AlertTimestampHeader, ts)
	}
	if maxAge > 0 {
		if d := now.Sub(time.Unix(sec, 0)); d > maxAge || d < -maxAge {
			return fmt.Errorf("%w: signed at %s, more than %s from now", ErrAlertSignature, time.Unix(sec, 0).UTC().Format(time.RFC3339), maxAge)
		}
	}
	if !hmac.Equal([]byte(h.Get(AlertSignatureHeader)), []byte(SignAlert(secret, ts, body))) {
		return fmt.Errorf("%w: %s does not match the body", ErrAlertSignature, AlertSignatureHeader)
	}
	return nil
}

// health is the part of a job's bookkeeping that alerts follow.
type health struct {
	failures int    // failed runs in a row
	last     string // the last transition alerted
}

// nextHealth returns the health of a job after a run that ended with
// status, and the transition to alert ("" for none) under cfg (nil: no
// alert is sent, the failures are counted all the same), and whether the
// job is to be paused.
func nextHealth(h health, status Status, cfg *AlertConfig) (health, string, bool) {
	switch status {
	case StatusSuccess:
		wasFailing := h.failures > 0 && h.last != "" && h.last != AlertRecovered
		h.failures = 0
		if cfg == nil || !wasFailing {
			return h, "", false
		}
		h.last = AlertRecovered
		return h, AlertRecovered, false
	case StatusFailed, StatusTimeout:
		if h.failures < 1<<30 {
			h.failures++
		}
	default:
		return h, "", false
	}
	if cfg == nil {
		return h, "", false
	}
	after := cfg.After
	if after == 0 {
		after = DefaultAlertAfter
	}
	var tr string
	pause := false
	switch {
	case cfg.PauseAfter > 0 && h.failures == cfg.PauseAfter:
		tr, pause = AlertPaused, true
	case h.failures == 1:
		tr = AlertFailing
	case h.failures == after:
		tr = AlertFailingStreak
	}
	if tr != "" {
		h.last = tr
	}
	return h, tr, pause
}

// alertFor returns the alert settings of a job with alert c (nil: none of
// its own), merged with the runner's default; nil when no URL applies.
func (r *Runner) alertFor(c *AlertConfig) *AlertConfig {
	def := &r.cfg.Alert
	switch {
	case c == nil && def.URL == "":
		return nil
	case c == nil:
		return def
	case c.URL != "":
		return c
	case def.URL == "":
		return nil
	}
	m := *c
	m.URL, m.Secret = def.URL, def.Secret
	return &m
}

// The alert loop takes up to alertBatch due alerts from the outbox at a
// time, delivers up to alertSenders of them at the same time, and holds
// each under a lease of alertLease (longer than an attempt) against the
// other runners of a shared store.
const (
	alertBatch   = 64
	alertSenders = 8
	alertLease   = 6 * alertTimeout
)

// raiseAlert makes the alert tr about run of the job in e and queues it
// for the recorder, which writes it to the outbox with the run. mu is
// held.
func (r *Runner) raiseAlert(e *entry, run Run, tr string, cfg *AlertConfig, failures int, pause bool) {
	typ := JobTypeHTTP
	if fn := e.fn(); fn != nil {
		typ = fn.typ
	}
	now := r.now().UTC()
	a := Alert{Transition: tr, Run: run, Error: run.Error, ConsecutiveFailures: failures, Time: now}
	a.Job.ID, a.Job.Name, a.Job.Type = e.id, e.name, typ
	r.raised = append(r.raised, AlertDelivery{ID: newID(), Alert: a, URL: cfg.URL, Secret: cfg.Secret, CreatedAt: now, NextAt: now})
	if pause {
		r.pauses = append(r.pauses, a)
	}
}

// raiseMissed raises a missed alert for each run of runs that is a missed
// record of a held job with an alert, at most once per its MissedEvery.
// mu is held.
func (r *Runner) raiseMissed(runs []ended) {
	for _, ev := range runs {
		if ev.drop || ev.run.Status != StatusMissed {
			continue
		}
		_, e, ok := r.lookup(ev.run.JobID)
		if !ok {
			continue
		}
		cfg := r.alertFor(e.cfg.alert)
		if cfg == nil || cfg.MissedEvery < 0 {
			continue
		}
		every := cfg.MissedEvery.D()
		if every == 0 {
			every = DefaultAlertMissedEvery
		}
		now := r.now()
		if last, ok := r.missedAt[e.id]; ok && now.Sub(last) < every && !now.Before(last) {
			continue
		}
		if r.missedAt == nil || len(r.missedAt) >= 1<<16 {
			r.missedAt = make(map[string]time.Time)
		}
		r.missedAt[e.id] = now
		r.raiseAlert(e, *ev.run, AlertMissed, cfg, e.health().failures, false)
	}
}

// takeAlerts returns the alerts raised since the last call, for the
// recorder, and raises the missed alerts of runs. mu is held.
func (r *Runner) takeAlerts(runs []ended) []AlertDelivery {
	r.raiseMissed(runs)
	ds := r.raised
	r.raised = nil
	return ds
}

// enqueueAlerts writes the alerts the recorder took to the outbox, once
// their runs are recorded, and wakes the alert loop.
func (r *Runner) enqueueAlerts(ctx context.Context, ds []AlertDelivery) {
	if len(ds) > 0 {
		if err := r.outbox.EnqueueAlerts(ctx, ds); err != nil {
			for _, d := range ds {
				r.log.Error("cron: alert lost: writing it to the outbox failed", "job_id", d.Alert.Job.ID,
					"transition", d.Alert.Transition, "run_id", d.Alert.Run.ID, "error", err)
			}
		}
	}
	r.mu.Lock()
	pauses := len(r.pauses) > 0
	r.mu.Unlock()
	if len(ds) > 0 || pauses {
		select {
		case r.alertWake <- struct{}{}:
		default:
		}
	}
}

// Alerts returns up to limit of the alerts waiting for delivery (dead
// false) or given up (dead true), oldest first, and how many there are
// of that kind: those of the store's [AlertOutbox], or, over a store
// without one, those of this runner's memory. Their secrets are left out.
func (r *Runner) Alerts(ctx context.Context, dead bool, limit int) ([]AlertDelivery, int, error) {
	ds, n, err := r.outbox.ListAlerts(ctx, dead, limit)
	for i := range ds {
		ds[i].Secret = ""
		ds[i].URL = RedactURL(ds[i].URL)
	}
	return ds, n, err
}

// alertLoop delivers the alerts of the outbox as they fall due, and makes
// the pauses of pause_after, until stop is closed; then it makes one
// more attempt at those due, until ctx ends.
func (r *Runner) alertLoop(ctx context.Context, stop <-chan struct{}) {
	poll := min(time.Second, r.cfg.AlertBackoff)
	t := time.NewTimer(poll)
	defer t.Stop()
	for {
		r.doPauses(ctx)
		if r.sendDue(ctx) == alertBatch {
			continue
		}
		t.Reset(poll)
		select {
		case <-r.alertWake:
		case <-t.C:
		case <-stop:
			r.doPauses(ctx)
			for r.sendDue(ctx) == alertBatch && ctx.Err() == nil {
			}
			return
		}
	}
}

// doPauses pauses the jobs whose alert said so.
func (r *Runner) doPauses(ctx context.Context) {
	r.mu.Lock()
	pauses := r.pauses
	r.pauses = nil
	r.mu.Unlock()
	for _, a := range pauses {
		if _, err := r.Pause(WithActor(ctx, ActorRunner), a.Job.ID, time.Time{}); err != nil && !errors.Is(err, ErrNotFound) {
			r.log.Error("cron: pause after failures", "job_id", a.Job.ID, "failures", a.ConsecutiveFailures, "error", err)
		} else if err == nil {
			r.log.Warn("cron: job paused after failures in a row", "job_id", a.Job.ID, "failures", a.ConsecutiveFailures)
		}
	}
}

// sendDue makes an attempt at each alert of the outbox that is due now,
// up to alertBatch, and returns how many it took.
func (r *Runner) sendDue(ctx context.Context) int {
	if ctx.Err() != nil {
		return 0
	}
	now := r.now()
	ds, err := r.outbox.TakeAlerts(ctx, now, now.Add(alertLease), alertBatch)
	if err != nil {
		r.log.Error("cron: take alerts from the outbox", "error", err)
		return 0
	}
	var g errgroup.Group
	g.SetLimit(alertSenders)
	for _, d := range ds {
		g.Go(func() error { r.attempt(ctx, d); return nil })
	}
	_ = g.Wait()
	return len(ds)
}

// attempt posts the alert d once and records the outcome in the outbox:
// delivered, retried later (a network error, a 5xx or a 429 answer, with
// a doubling backoff up to MaxAlertBackoff, while the next attempt falls
// within the horizon and the retries allowed), or dead.
func (r *Runner) attempt(ctx context.Context, d AlertDelivery) {
	a := &d.Alert
	body, err := json.Marshal(a)
	retry := false
	if err == nil {
		d.Attempts++
		retry, err = r.postAlert(ctx, d, body)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err == nil {
		if serr := r.outbox.SettleAlert(sctx, d, true); serr != nil {
			r.log.Error("cron: record an alert delivered", "job_id", a.Job.ID, "delivery_id", d.ID, "error", serr)
		}
		r.log.Info("cron: alert delivered", "job_id", a.Job.ID, "transition", a.Transition, "run_id", a.Run.ID,
			"delivery_id", d.ID, "attempts", d.Attempts)
		if o, ok := r.cfg.Observer.(AlertObserver); ok {
			o.AlertDelivered(*a, d.Attempts, nil)
		}
		return
	}
	now := r.now()
	d.LastError = err.Error()
	wait := MaxAlertBackoff
	if n := d.Attempts - 1; n < 30 {
		wait = min(r.cfg.AlertBackoff<<n, MaxAlertBackoff)
	}
	d.NextAt = now.Add(wait).UTC()
	retries := r.cfg.AlertRetries
	switch {
	case ctx.Err() != nil:
		// Cut short by the runner's stop: tried again at the next start.
		d.NextAt = now.UTC()
	case !retry, retries < 0, retries > 0 && d.Attempts > retries,
		d.NextAt.After(d.CreatedAt.Add(r.cfg.AlertHorizon)):
		d.Dead, d.NextAt = true, time.Time{}
	}
	if serr := r.outbox.SettleAlert(sctx, d, false); serr != nil {
		r.log.Error("cron: record an alert attempt", "job_id", a.Job.ID, "delivery_id", d.ID, "error", serr)
	}
	if !d.Dead {
		r.log.Warn("cron: alert delivery failed; it will be tried again", "job_id", a.Job.ID, "transition", a.Transition,
			"run_id", a.Run.ID, "delivery_id", d.ID, "attempts", d.Attempts, "next_at", d.NextAt, "error", err)
		return
	}
	r.log.Error("cron: alert delivery failed; the alert is dead", "job_id", a.Job.ID, "transition", a.Transition,
		"run_id", a.Run.ID, "delivery_id", d.ID, "attempts", d.Attempts, "error", err)
	if o, ok := r.cfg.Observer.(AlertObserver); ok {
		o.AlertDelivered(*a, d.Attempts, err)
	}
}

// postAlert makes one attempt, signed now, and says whether a failure may
// be retried.
func (r *Runner) postAlert(ctx context.Context, d AlertDelivery, body []byte) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, alertTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	ts := strconv.FormatInt(r.now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ksana-alert")
	req.Header.Set(AlertTimestampHeader, ts)
	req.Header.Set(AlertDeliveryHeader, d.ID)
	if d.Secret != "" {
		req.Header.Set(AlertSignatureHeader, SignAlert(d.Secret, ts, body))
	}
	client := r.cfg.AlertClient
	if client == nil {
		client = http.DefaultClient
	}
	if allow := r.cfg.AlertAllowHosts; len(allow) > 0 {
		if h := req.URL.Hostname(); !allow.Allows(h) {
			return false, &hostRefusedError{host: h}
		}
		// A client of its own per alert, without idle connections left
		// behind: alerts are few.
		client = guardedClient(client, allow, r.cfg.AlertAllowLoopback, false)
	}
	resp, err := client.Do(req)
	if err != nil {
		var he *hostRefusedError
		var ae *addrRefusedError
		if errors.As(err, &he) || errors.As(err, &ae) {
			return false, err
		}
		return true, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return false, nil
	}
	return resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests, fmt.Errorf("webhook answered %s", resp.Status)
}

// alertTimeout bounds one attempt of an alert delivery.
const alertTimeout = 10 * time.Second
