package main

import (
	"context"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/httpapi"
	"github.com/prometheus/client_golang/prometheus"
)

// alertReadTimeout bounds a read of the alert outbox for /health or a
// scrape.
const alertReadTimeout = 2 * time.Second

// alertNotes are the /health notes of the alert outbox: the alerts
// pending and dead and the oldest of each, when there are any; an
// outbox that cannot be read says so.
func alertNotes(r *cron.Runner) map[string]any {
	ctx, cancel := context.WithTimeout(context.Background(), alertReadTimeout)
	defer cancel()
	a, err := httpapi.AlertSummary(ctx, r, false, 0)
	if err != nil {
		return map[string]any{"alerts_error": err.Error()}
	}
	if a.Pending == 0 && a.Dead == 0 {
		return nil
	}
	n := map[string]any{"alerts_pending": a.Pending, "alerts_dead": a.Dead}
	if a.OldestPending != nil {
		n["alerts_oldest_pending"] = a.OldestPending.UTC().Format(time.RFC3339)
	}
	if a.OldestDead != nil {
		n["alerts_oldest_dead"] = a.OldestDead.UTC().Format(time.RFC3339)
	}
	return n
}

// alertCollector exports the alert outbox's gauges, read at each scrape.
type alertCollector struct{ r *cron.Runner }

var (
	alertsPendingDesc = prometheus.NewDesc("ksana_alerts_pending",
		"Alerts waiting for delivery (in the store's outbox: shared by every instance on a database).", nil, nil)
	alertsDeadDesc = prometheus.NewDesc("ksana_alerts_dead",
		"Alerts given up (past KSANA_ALERT_HORIZON, or refused for good by the webhook); the newest 1000 are kept.", nil, nil)
	alertsOldestDesc = prometheus.NewDesc("ksana_alerts_oldest_pending_seconds",
		"Age of the oldest alert waiting for delivery (0: none).", nil, nil)
)

func (alertCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- alertsPendingDesc
	ch <- alertsDeadDesc
	ch <- alertsOldestDesc
}

func (c alertCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), alertReadTimeout)
	defer cancel()
	a, err := httpapi.AlertSummary(ctx, c.r, false, 0)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(alertsPendingDesc, err)
		return
	}
	age := 0.0
	if a.OldestPending != nil {
		age = max(time.Since(*a.OldestPending).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(alertsPendingDesc, prometheus.GaugeValue, float64(a.Pending))
	ch <- prometheus.MustNewConstMetric(alertsDeadDesc, prometheus.GaugeValue, float64(a.Dead))
	ch <- prometheus.MustNewConstMetric(alertsOldestDesc, prometheus.GaugeValue, age)
}
