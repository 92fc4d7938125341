package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// DefaultAlertsLimit is how many alerts GET /alerts lists without limit.
const DefaultAlertsLimit = 100

// AlertsAnswer is the body of GET /alerts: how many alerts wait for
// delivery (pending) and how many were given up (dead), when the oldest
// of each was raised, and the oldest alerts of the state asked for.
type AlertsAnswer struct {
	Pending       int                  `json:"pending"`
	Dead          int                  `json:"dead"`
	OldestPending *time.Time           `json:"oldest_pending,omitempty"`
	OldestDead    *time.Time           `json:"oldest_dead,omitempty"`
	Alerts        []cron.AlertDelivery `json:"alerts"`
}

// alertsParams are the query parameters of GET /alerts.
var alertsParams = []string{"limit", "state"}

// alerts answers GET /alerts: the alert outbox, read-only. Secrets are
// never shown: not the webhook's secret, nor its URL's credentials, and
// the run's error as the caller's role may read it.
func (s *Server) alerts(w http.ResponseWriter, req *http.Request, _ string) {
	q := req.URL.Query()
	dead, limit := false, DefaultAlertsLimit
	if rerr := eachParam(q, func(key, v string) *RequestError {
		switch key {
		case "state":
			switch v {
			case "pending":
			case "dead":
				dead = true
			default:
				return badField("state", "must be pending or dead, got %q", v)
			}
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxListLimit {
				return badField("limit", "must be an integer from 1 to %d, got %q", MaxListLimit, v)
			}
			limit = n
		default:
			return badField(key, "unknown query parameter; GET /alerts takes %s", strings.Join(alertsParams, ", "))
		}
		return nil
	}); rerr != nil {
		writeError(w, rerr)
		return
	}
	ans, err := AlertSummary(req.Context(), s.r, dead, limit)
	if err != nil {
		w.Header().Set("Retry-After", "2")
		writeError(w, &RequestError{Status: http.StatusServiceUnavailable, Msg: "reading the alert outbox: " + err.Error()})
		return
	}
	role := roleOf(req)
	for i := range ans.Alerts {
		a := &ans.Alerts[i].Alert
		a.Run = a.Run.RedactedFor(role)
		a.Error = cron.Run{Error: a.Error}.RedactedFor(role).Error
		ans.Alerts[i].LastError = cron.Run{Error: ans.Alerts[i].LastError}.RedactedFor(role).Error
	}
	writeJSON(w, http.StatusOK, ans)
}

// AlertSummary reads the alert outbox of r ([cron.Runner.Alerts]): how
// many alerts are pending and dead, when the oldest of each was raised,
// and up to limit of the oldest alerts, dead ones or pending ones (limit
// 0: none). cmd/ksana also shows it in /health and its metrics.
func AlertSummary(ctx context.Context, r *cron.Runner, dead bool, limit int) (AlertsAnswer, error) {
	ans := AlertsAnswer{Alerts: []cron.AlertDelivery{}}
	for _, kind := range []bool{false, true} {
		n := 1
		if kind == dead {
			n = max(limit, 1)
		}
		l, count, err := r.Alerts(ctx, kind, n)
		if err != nil {
			return AlertsAnswer{}, err
		}
		var oldest *time.Time
		if len(l) > 0 {
			t := l[0].CreatedAt
			oldest = &t
		}
		if kind {
			ans.Dead, ans.OldestDead = count, oldest
		} else {
			ans.Pending, ans.OldestPending = count, oldest
		}
		if kind == dead && limit > 0 {
			ans.Alerts = l
		}
	}
	return ans, nil
}
