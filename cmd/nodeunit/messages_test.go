package main

import (
	"database/sql"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/internal/testenv"
)

// freshSchema creates a PostgreSQL schema for t, dropped at cleanup, and
// returns its name and a plain connection to the server.
func freshSchema(t *testing.T) (string, *sql.DB) {
	t.Helper()
	schema, _ := testenv.PostgresSchema(t)
	admin, err := sql.Open("pgx", testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	return schema, admin
}

// withSearchPath returns the test server's URL with search_path set.
func withSearchPath(t *testing.T, schema string) string {
	t.Helper()
	u, err := url.Parse(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// closedPort returns an address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestMessages: what a user reads for a mistake is one true line on
// standard error, in one form for every setting.
func TestMessages(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	down := "postgres://u@" + closedPort(t) + "/db?connect_timeout=5"
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		wantCode int
		want     string // the whole of standard error, when wantHas is empty
		wantHas  []string
	}{
		{
			name: "unknown command: one line and a pointer to -h",
			args: []string{"foo"}, wantCode: exitUsage,
			want: "nodeunit: unknown command \"foo\" (nodeunit -h lists the commands)\n",
		},
		{
			name: "unknown claim policy: the variable once, the reason once",
			env:  map[string]string{"NODE_UNIT_CLAIM_POLICY": "random", "NODE_UNIT_DATA": data},
			args: []string{"run"}, wantCode: exitUsage,
			want: "nodeunit: NODE_UNIT_CLAIM_POLICY=\"random\": unknown claim policy: want deployment_count, resource_usage or none\n",
		},
		{
			name: "bad interval in an admin command",
			env:  map[string]string{"NODE_UNIT_SCHEDULER_INTERVAL_MS": "5s", "NODE_UNIT_DATA": data},
			args: []string{"list"}, wantCode: exitUsage,
			want: "nodeunit list: NODE_UNIT_SCHEDULER_INTERVAL_MS=\"5s\": not a whole number of milliseconds\n",
		},
		{
			name: "a daemon with an address is refused, not ignored",
			env:  map[string]string{"NODE_UNIT_DATA": data},
			args: []string{"add", "--id", "x", "--type", "daemon", "--address", "a", "sleep", "1"}, wantCode: exitUsage,
			want: "nodeunit add: claim: ERR_DAEMON_ADDRESS_SET: deployment \"x\": --address is for type deployment only: a daemon runs on every node-unit and has no address\n",
		},
		{
			name: "a coded error reads claim: CODE: deployment, whoever raises it",
			env:  map[string]string{"NODE_UNIT_DATA": data},
			args: []string{"add", "--id", "x", "--type", "cron", "sleep", "1"}, wantCode: exitUsage,
			want: "nodeunit add: claim: ERR_INVALID_TYPE: deployment \"x\": type \"cron\" is neither \"daemon\" nor \"deployment\"\n",
		},
		{
			name: "an unreachable database stops run with a plain line, like other settings",
			env:  map[string]string{"DATABASE_URL": down, "NODE_UNIT_DATA": data},
			args: []string{"run"}, wantCode: exitUsage,
			wantHas: []string{"nodeunit: DATABASE_URL=\"" + down + "\": sqlstore: connect postgres:"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runCmd(tt.env, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.wantCode, errOut)
			}
			if tt.wantHas == nil {
				if diff := cmp.Diff(tt.want, errOut); diff != "" {
					t.Errorf("stderr (-want +got):\n%s", diff)
				}
				return
			}
			for _, w := range tt.wantHas {
				if !strings.HasPrefix(errOut, w) {
					t.Errorf("stderr %q, want it to start with %q", errOut, w)
				}
			}
			if strings.Contains(errOut, "level=") {
				t.Errorf("stderr is a structured log line, want a plain one: %q", errOut)
			}
		})
	}
}

// TestAddWarnsAboutTrust: add says when the command does not match the
// trust rule of its environment; a matching command gets no warning.
func TestAddWarnsAboutTrust(t *testing.T) {
	t.Parallel()
	env := map[string]string{"NODE_UNIT_DATA": filepath.Join(t.TempDir(), "data"), "NODE_UNIT_TRUSTED_COMMAND_REGEXP": "sleep"}
	code, out, errOut := runCmd(env, "add", "--id", "a", "/bin/sleep", "1")
	if code != exitOK || out != "added deployment \"a\" (enabled)\n" {
		t.Fatalf("add: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	want := "nodeunit add: warning: command \"/bin/sleep\" does not match NODE_UNIT_TRUSTED_COMMAND_REGEXP \"sleep\": node-units with this setting will not run it (nodeunit status shows which do)\n"
	if diff := cmp.Diff(want, errOut); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
	if code, _, errOut := runCmd(env, "add", "--id", "b", "sleep", "1"); code != exitOK || errOut != "" {
		t.Errorf("add of a trusted command: exit %d, stderr %q; want 0 and nothing", code, errOut)
	}
}

func TestSQLitePath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url, want string
		ok        bool
	}{
		{"sqlite:data/nodeunit.db", "data/nodeunit.db", true},
		{"sqlite:///tmp/x.db?_busy_timeout=1", "/tmp/x.db", true},
		{"file:x.db?mode=ro", "x.db", true},
		{"x.db", "x.db", true},
		{":memory:", "", false},
		{"postgres://u@h/db", "", false},
		{"POSTGRESQL://u@h/db", "", false},
		{"mysql://x/y", "", false},
	}
	for _, tt := range tests {
		if got, ok := sqlitePath(tt.url); got != tt.want || ok != tt.ok {
			t.Errorf("sqlitePath(%q) = %q, %v; want %q, %v", tt.url, got, ok, tt.want, tt.ok)
		}
	}
}

// TestReadOnlyCommandsSQLite: list, nodes and status on a data directory
// with no database, or on a DATABASE_URL naming a missing file, fail with
// exit 1 and a line saying where they looked, and create nothing.
func TestReadOnlyCommandsSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"NODE_UNIT_DATA": data},
			"no database at " + filepath.Join(data, "nodeunit.db") + " (the default in NODE_UNIT_DATA; set DATABASE_URL for another)"},
		{map[string]string{"NODE_UNIT_DATA": data, "DATABASE_URL": "sqlite:" + filepath.Join(dir, "other.db")},
			"no database at " + filepath.Join(dir, "other.db") + " (DATABASE_URL)"},
	} {
		noDatabase(t, tt.env, tt.want)
	}
	for _, p := range []string{data, filepath.Join(dir, "other.db")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("the read-only commands created %s (stat: %v)", p, err)
		}
	}
}

// noDatabase runs the read-only commands where nothing was added yet:
// each fails with exitError, prints nothing on stdout and says where it
// looked (where) on stderr.
func noDatabase(t *testing.T, env map[string]string, where string) {
	t.Helper()
	for _, cmd := range []string{"list", "nodes", "status"} {
		code, out, errOut := runCmd(env, cmd)
		want := "nodeunit " + cmd + ": " + where + `: nothing was added yet ("nodeunit add" or "nodeunit run" creates it)` + "\n"
		if code != exitError || out != "" {
			t.Errorf("%s: exit %d, stdout %q; want exit %d and nothing", cmd, code, out, exitError)
		}
		if diff := cmp.Diff(want, errOut); diff != "" {
			t.Errorf("%s: stderr (-want +got):\n%s", cmd, diff)
		}
	}
}

// TestPostgresSchema: read-only commands leave an empty schema without
// tables; a search_path naming a missing schema is one line that names it
// and says what to do; without search_path the start-up line says where
// the tables are.
func TestPostgresSchema(t *testing.T) {
	t.Parallel()
	schema, admin := freshSchema(t)
	env := map[string]string{"DATABASE_URL": withSearchPath(t, schema), "NODE_UNIT_DATA": filepath.Join(t.TempDir(), "data")}
	noDatabase(t, env, "no node-unit tables in DATABASE_URL=\""+redactURL(env["DATABASE_URL"])+"\"")
	var n int
	if err := admin.QueryRow("SELECT count(*) FROM information_schema.tables WHERE table_schema = $1", schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d tables in %s after list, nodes and status; want none", n, schema)
	}
	if code, _, errOut := runCmd(env, "add", "--id", "a", "sleep", "1"); code != exitOK {
		t.Fatalf("add: exit %d, stderr %q", code, errOut)
	}
	if code, out, _ := runCmd(env, "list"); code != exitOK || !strings.Contains(out, "sleep 1") {
		t.Errorf("list after add: exit %d, %q", code, out)
	}

	missing := withSearchPath(t, schema+"_missing")
	for _, cmd := range []string{"list", "add", "run"} {
		args := []string{cmd}
		if cmd == "add" {
			args = append(args, "--id", "a", "sleep", "1")
		}
		code, _, errOut := runCmd(map[string]string{"DATABASE_URL": missing, "NODE_UNIT_DATA": env["NODE_UNIT_DATA"], "NODE_UNIT_TRUSTED_COMMAND_REGEXP": "sleep"}, args...)
		prefix := "nodeunit " + cmd + ": "
		if cmd == "run" {
			prefix = "nodeunit: "
		}
		want := prefix + "DATABASE_URL=\"" + redactURL(missing) + "\": sqlstore: no schema of search_path \"" + schema + "_missing\" exists: create it (CREATE SCHEMA " + schema + "_missing) or set search_path in the database URL to an existing schema\n"
		if code != exitUsage {
			t.Errorf("%s with a missing schema: exit %d, want %d", cmd, code, exitUsage)
		}
		if diff := cmp.Diff(want, errOut); diff != "" {
			t.Errorf("%s with a missing schema: stderr (-want +got):\n%s", cmd, diff)
		}
	}
}
