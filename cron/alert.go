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
	return nil
}

// same reports whether c and d are equal (both nil included).
func (c *AlertConfig) same(d *AlertConfig) bool {
	if c == nil || d == nil {
		return c == d
	}
	return *c == *d
}

// AlertJob identifies the job of an [Alert].
type AlertJob struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// Alert is the JSON body of an alert request.
type Alert struct {
	// Transition is failing, failing_streak, recovered or paused.
	Transition string   `json:"transition"`
	Job        AlertJob `json:"job"`
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
// told of each alert once its delivery is over, with the attempts made
// and the last error (nil: delivered). It is called from the goroutine
// that delivered it.
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

// alertTask is an alert waiting for delivery.
type alertTask struct {
	alert Alert
	cfg   AlertConfig
	pause bool
}

// alertQueueLen bounds the alerts waiting for delivery; more are dropped,
// with an error logged.
const alertQueueLen = 1024

// alertSenders is the number of alerts delivered at the same time.
const alertSenders = 4

// raiseAlert queues an alert about run of the job in e. mu is held.
func (r *Runner) raiseAlert(e *entry, run Run, tr string, cfg *AlertConfig, failures int, pause bool) {
	typ := JobTypeHTTP
	if fn := e.fn(); fn != nil {
		typ = fn.typ
	}
	a := Alert{
		Transition: tr, Job: AlertJob{ID: e.id, Name: e.name, Type: typ}, Run: run, Error: run.Error,
		ConsecutiveFailures: failures, Time: r.now().UTC(),
	}
	select {
	case r.alerts <- alertTask{alert: a, cfg: *cfg, pause: pause}:
	default:
		r.log.Error("cron: alert dropped: too many alerts wait for delivery", "job_id", e.id, "transition", tr, "run_id", run.ID)
	}
}

// alertSender delivers queued alerts until stop is closed, then those
// still queued, until ctx ends.
func (r *Runner) alertSender(ctx context.Context, stop <-chan struct{}) {
	for {
		select {
		case t := <-r.alerts:
			r.deliver(ctx, t)
			continue
		default:
		}
		select {
		case t := <-r.alerts:
			r.deliver(ctx, t)
		case <-stop:
			for {
				select {
				case t := <-r.alerts:
					r.deliver(ctx, t)
				default:
					return
				}
			}
		}
	}
}

// deliver pauses the job when the alert says so, then posts the alert,
// retrying a network error, a 5xx or a 429 with a doubling backoff.
func (r *Runner) deliver(ctx context.Context, t alertTask) {
	a := &t.alert
	if t.pause {
		if _, err := r.Pause(WithActor(ctx, ActorRunner), a.Job.ID, time.Time{}); err != nil && !errors.Is(err, ErrNotFound) {
			r.log.Error("cron: pause after failures", "job_id", a.Job.ID, "failures", a.ConsecutiveFailures, "error", err)
		} else if err == nil {
			r.log.Warn("cron: job paused after failures in a row", "job_id", a.Job.ID, "failures", a.ConsecutiveFailures)
		}
	}
	body, err := json.Marshal(a)
	if err != nil {
		r.log.Error("cron: encode alert", "job_id", a.Job.ID, "error", err)
		return
	}
	backoff := r.cfg.AlertBackoff
	attempts := 0
	for {
		attempts++
		var retry bool
		retry, err = r.postAlert(ctx, t.cfg, body)
		if err == nil || !retry || attempts > r.cfg.AlertRetries || ctx.Err() != nil {
			break
		}
		tm := time.NewTimer(backoff)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
		}
		backoff *= 2
	}
	if err != nil {
		r.log.Error("cron: alert delivery failed", "job_id", a.Job.ID, "transition", a.Transition, "run_id", a.Run.ID,
			"attempts", attempts, "error", err)
	} else {
		r.log.Info("cron: alert delivered", "job_id", a.Job.ID, "transition", a.Transition, "run_id", a.Run.ID, "attempts", attempts)
	}
	if o, ok := r.cfg.Observer.(AlertObserver); ok {
		o.AlertDelivered(*a, attempts, err)
	}
}

// postAlert makes one attempt, and says whether a failure may be retried.
func (r *Runner) postAlert(ctx context.Context, cfg AlertConfig, body []byte) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, alertTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	ts := strconv.FormatInt(r.now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ksana-alert")
	req.Header.Set(AlertTimestampHeader, ts)
	if cfg.Secret != "" {
		req.Header.Set(AlertSignatureHeader, SignAlert(cfg.Secret, ts, body))
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
