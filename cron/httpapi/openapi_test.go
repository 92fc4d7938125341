package httpapi

import (
	"encoding/json"
	"maps"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
)

// openAPIDoc is the part of the OpenAPI document the test reads.
type openAPIDoc struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"schemas"`
	} `json:"components"`
}

func jsonNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestOpenAPI keeps /openapi.json true to the handler: every route and
// method the handler serves is documented and the other way round, and the
// fields of the job, http, schedule and run objects and the query
// parameters of GET /jobs are the ones the handler reads and writes.
func TestOpenAPI(t *testing.T) {
	f := newFixture(t, Config{Token: "s3cret-token-0001"})
	if r := f.do(t, "GET", "/openapi.json", "", nil); r.status != 401 {
		t.Errorf("GET /openapi.json without the token: %d, want 401 (only /health is open)", r.status)
	}
	r := f.do(t, "GET", "/openapi.json", "", map[string]string{"Authorization": "Bearer s3cret-token-0001"})
	if r.status != 200 || r.body != string(openAPI) {
		t.Fatalf("GET /openapi.json: %d, body equal to the embedded document: %v", r.status, r.body == string(openAPI))
	}
	var doc openAPIDoc
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}

	// Routes: each documented path matches the route of the same pattern,
	// with the same methods (HEAD aside); each route the handler serves is
	// documented.
	served := []string{"/health", "/metrics", "/openapi.json", "/jobs", "/jobs/x", "/jobs/x/run-now", "/jobs/x/pause", "/jobs/x/resume", "/jobs/x/runs", "/jobs/x/next", "/runs", "/runs/x", "/schedules/preview", "/audit", "/alerts", "/pause", "/resume"}
	var servedPatterns []string
	for _, p := range served {
		pattern, ok := f.api.routeOf(p)
		if !ok {
			t.Fatalf("%s: no route", p)
		}
		servedPatterns = append(servedPatterns, pattern)
	}
	slices.Sort(servedPatterns)
	if diff := cmp.Diff(servedPatterns, keys(doc.Paths)); diff != "" {
		t.Errorf("paths (-served +documented):\n%s", diff)
	}
	routes := map[string]route{}
	for _, rt := range f.api.routes() {
		routes[rt.path] = rt
	}
	for path, ops := range doc.Paths {
		pattern, ok := f.api.routeOf(strings.ReplaceAll(path, "{id}", "x"))
		rt := routes[pattern]
		if !ok || pattern != path {
			t.Errorf("documented path %s: the handler routes it to %q (%v)", path, pattern, ok)
			continue
		}
		var documented []string
		for op := range ops {
			if op != "parameters" {
				documented = append(documented, strings.ToUpper(op))
			}
		}
		slices.Sort(documented)
		var allowed []string
		for _, m := range strings.Split(rt.allow, ", ") {
			if m != "HEAD" {
				allowed = append(allowed, m)
			}
		}
		slices.Sort(allowed)
		if diff := cmp.Diff(allowed, documented); diff != "" {
			t.Errorf("methods of %s (-served +documented):\n%s", path, diff)
		}
		if diff := cmp.Diff(allowed, slices.Sorted(maps.Keys(rt.handlers))); diff != "" {
			t.Errorf("handlers of %s (-allowed +handled):\n%s", path, diff)
		}
	}

	// Fields.
	schema := func(name string) []string { return keys(doc.Components.Schemas[name].Properties) }
	var input []string
	for _, fl := range jobFieldOrder {
		if !systemFields[fl] {
			input = append(input, fl)
		}
	}
	slices.Sort(input)
	all := slices.Sorted(slices.Values(jobFieldOrder))
	for _, tc := range []struct {
		schema string
		want   []string
	}{
		{"JobInput", input},
		{"Job", all},
		{"HTTP", jsonNames(reflect.TypeFor[httpBody]())},
		{"Schedule", jsonNames(reflect.TypeFor[scheduleBody]())},
		{"Run", jsonNames(reflect.TypeFor[cron.Run]())},
		{"Next", jsonNames(reflect.TypeFor[NextAnswer]())},
		{"Preview", jsonNames(reflect.TypeFor[PreviewAnswer]())},
		{"PreviewInput", previewFields},
		{"AuditEntry", jsonNames(reflect.TypeFor[AuditEntry]())},
		{"Forbidden", jsonNames(reflect.TypeFor[forbiddenBody]())},
		{"Alert", jsonNames(reflect.TypeFor[alertBody]())},
		{"AlertPayload", jsonNames(reflect.TypeFor[cron.Alert]())},
		{"RunNowInput", jsonNames(reflect.TypeFor[runNowBody]())},
		{"Alerts", jsonNames(reflect.TypeFor[AlertsAnswer]())},
		{"AlertDelivery", jsonNames(reflect.TypeFor[cron.AlertDelivery]())},
		{"Error", jsonNames(reflect.TypeFor[errorBody]())},
	} {
		if diff := cmp.Diff(tc.want, schema(tc.schema)); diff != "" {
			t.Errorf("schema %s properties (-handler +documented):\n%s", tc.schema, diff)
		}
	}
	// The job the API writes has exactly the documented Job fields.
	var written map[string]any
	if err := json.Unmarshal(must(cron.Job{}.MarshalJSON()), &written); err != nil {
		t.Fatal(err)
	}
	omitted := []string{"misfire_grace", "args", "alert", "keep_runs", "failures", "last_alert", "paused_until", "paused_at"} // when zero
	wantWritten := slices.DeleteFunc(slices.Clone(all), func(s string) bool { return slices.Contains(omitted, s) })
	if diff := cmp.Diff(wantWritten, keys(written)); diff != "" {
		t.Errorf("fields of a written job (-documented +written):\n%s", diff)
	}
	for path, want := range map[string][]string{"/jobs": listParams, "/audit": auditParams, "/runs": historyParams, "/alerts": alertsParams} {
		var get struct {
			Parameters []struct {
				Name string `json:"name"`
			} `json:"parameters"`
		}
		if err := json.Unmarshal(doc.Paths[path]["get"], &get); err != nil {
			t.Fatal(err)
		}
		var params []string
		for _, p := range get.Parameters {
			params = append(params, p.Name)
		}
		slices.Sort(params)
		if diff := cmp.Diff(slices.Sorted(slices.Values(want)), params); diff != "" {
			t.Errorf("GET %s query parameters (-handler +documented):\n%s", path, diff)
		}
	}
	// Each operation that needs more than the viewer role documents its
	// 403, and no other does.
	for path, ops := range doc.Paths {
		for op, raw := range ops {
			if op == "parameters" {
				continue
			}
			var o struct {
				Responses map[string]json.RawMessage `json:"responses"`
			}
			if err := json.Unmarshal(raw, &o); err != nil {
				t.Fatal(err)
			}
			_, has := o.Responses["403"]
			if want := NeedRole(strings.ToUpper(op), path) != RoleViewer; has != want {
				t.Errorf("%s %s documents a 403: %v, want %v", op, path, has, want)
			}
		}
	}
}

// routeOf returns the path pattern of the route that serves path.
func (s *Server) routeOf(path string) (string, bool) {
	_, pattern := s.mux.Handler(httptest.NewRequest("GET", path, nil))
	if _, p, ok := strings.Cut(pattern, " "); ok {
		pattern = p
	}
	return pattern, pattern != "" && pattern != "/"
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
