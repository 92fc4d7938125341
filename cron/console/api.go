package console

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
)

// apiAnswer is the API's answer to one request made by the console.
type apiAnswer struct {
	Status int
	Body   []byte
	Header http.Header
}

// ok reports a 2xx answer.
func (a apiAnswer) ok() bool { return a.Status >= 200 && a.Status <= 299 }

// problem returns the error message and the field of a refused request
// ({"error": ..., "field": ...}).
func (a apiAnswer) problem() (msg, field string) {
	var e struct {
		Error string `json:"error"`
		Field string `json:"field"`
	}
	if json.Unmarshal(a.Body, &e) != nil || e.Error == "" {
		return http.StatusText(a.Status), ""
	}
	return e.Error, e.Field
}

// recorder is the http.ResponseWriter of a request to the API.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// call makes a request to the API as u: the API applies its own rules,
// roles and audit, as to any client. path is the API's ("/jobs/x/pause"),
// body a JSON document or nil.
func (c *Console) call(ctx context.Context, u user, method, path string, body []byte) apiAnswer {
	return c.callWith(ctx, u, method, path, body, nil)
}

// callWith is call with the request headers hdr added.
func (c *Console) callWith(ctx context.Context, u user, method, path string, body []byte, hdr http.Header) apiAnswer {
	req, err := http.NewRequestWithContext(ctx, method, path, bytes.NewReader(body))
	if err != nil {
		return apiAnswer{Status: http.StatusBadRequest, Body: mustJSON(map[string]string{"error": err.Error()})}
	}
	req.RequestURI = path
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range hdr {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if u.token != "" {
		req.Header.Set("Authorization", "Bearer "+u.token)
	}
	rec := &recorder{header: http.Header{}}
	c.api.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return apiAnswer{Status: rec.status, Body: rec.body.Bytes(), Header: rec.header}
}

// jobPath is the API path of job id, with an optional action.
func jobPath(id string, action string) string {
	p := "/jobs/" + url.PathEscape(id)
	if action != "" {
		p += "/" + action
	}
	return p
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
