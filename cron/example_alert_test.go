package cron_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// A receiver of alerts checks each request's signature before it trusts
// the body: X-Ksana-Signature is "sha256=" and the hex HMAC-SHA256, keyed
// by the alert's secret, of X-Ksana-Timestamp, a '.', and the body.
// VerifyAlert also refuses a timestamp too far from now (a replay).
func ExampleVerifyAlert() {
	const secret = "s3cret"
	receiver := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := cron.VerifyAlert(secret, r.Header, body, time.Now(), 5*time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		fmt.Println("verified:", string(body))
	})

	// What the runner sends (see cron.SignAlert), and a forgery.
	body := `{"transition":"failing","job":{"id":"report","name":"","type":"http"}}`
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	for _, sig := range []string{cron.SignAlert(secret, ts, []byte(body)), "sha256=00"} {
		req := httptest.NewRequest("POST", "/alerts", strings.NewReader(body))
		req.Header.Set(cron.AlertTimestampHeader, ts)
		req.Header.Set(cron.AlertSignatureHeader, sig)
		w := httptest.NewRecorder()
		receiver.ServeHTTP(w, req)
		fmt.Println(w.Code)
	}
	// Output:
	// verified: {"transition":"failing","job":{"id":"report","name":"","type":"http"}}
	// 200
	// 401
}
