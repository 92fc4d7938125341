package main

import (
	"bytes"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/internal/testenv"
)

func TestParseAdd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		want    claim.Deployment
		wantErr error  // checked with errors.Is when set
		errText string // else the error must contain this
	}{
		{
			name: "positional command",
			args: []string{"--id", "d1", "sleep", "3600"},
			want: claim.Deployment{ID: "d1", Type: "deployment", Enabled: true, Command: "sleep", Args: []string{"3600"}},
		},
		{
			name: "flags for everything",
			args: []string{"--id", "d2", "--type", "daemon", "--command", "app", "--arg", "-v", "--arg", "x y", "--env", "A=1", "--env", "B=x=y", "--package", "web", "--version", "1.2", "--disabled"},
			want: claim.Deployment{ID: "d2", Type: "daemon", Command: "app", Args: []string{"-v", "x y"}, Env: map[string]string{"A": "1", "B": "x=y"}, PackageName: "web", PackageVersion: "1.2"},
		},
		{
			name: "flags after the command are its arguments",
			args: []string{"--id", "d3", "--address", "node-a", "sh", "-c", "echo hi"},
			want: claim.Deployment{ID: "d3", Type: "deployment", Enabled: true, Address: "node-a", Command: "sh", Args: []string{"-c", "echo hi"}},
		},
		{name: "invalid type", args: []string{"--id", "d", "--type", "cron", "sleep"}, wantErr: claim.ErrInvalidType},
		{name: "daemon with address", args: []string{"--id", "d", "--type", "daemon", "--address", "a", "sleep"}, wantErr: claim.ErrDaemonAddressSet},
		{name: "no id", args: []string{"sleep"}, errText: "--id is required"},
		{name: "no command", args: []string{"--id", "d"}, errText: "no command"},
		{name: "two commands", args: []string{"--id", "d", "--command", "a", "b"}, errText: "not both"},
		{name: "two argument forms", args: []string{"--id", "d", "--arg", "1", "sleep", "2"}, errText: "not both"},
		{name: "bad env", args: []string{"--id", "d", "--env", "NOVALUE", "sleep"}, errText: `--env "NOVALUE"`},
		{name: "unknown flag", args: []string{"--id", "d", "--bogus", "sleep"}, errText: "bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseAdd(tt.args)
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("error = %v, want %v", err, tt.wantErr)
				}
			case tt.errText != "":
				if err == nil || !strings.Contains(err.Error(), tt.errText) {
					t.Errorf("error = %v, want one containing %q", err, tt.errText)
				}
			case err != nil:
				t.Fatalf("parseAdd: %v", err)
			default:
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestWriteList(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	writeList(&b, []claim.Deployment{
		{ID: "d1", Type: "deployment", Enabled: true, Address: "node-a", Command: "sleep", Args: []string{"3600"}},
		{ID: "daemon-1", Type: "daemon", Command: "sh", Args: []string{"-c", "echo $HOME"}},
	})
	want := `ID        TYPE        ENABLED  ADDRESS  COMMAND
d1        deployment  true     node-a   sleep 3600
daemon-1  daemon      false    -        sh -c "echo $HOME"
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// runCmd runs a sub-command in-process.
func runCmd(env map[string]string, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, envOf(env), &out, &errOut)
	return code, out.String(), errOut.String()
}

// exerciseAdmin runs the admin sub-commands against the database of env.
func exerciseAdmin(t *testing.T, env map[string]string) {
	steps := []struct {
		args       []string
		wantCode   int
		wantOut    string // exact, when wantErr is empty
		wantErrHas string
	}{
		{args: []string{"add", "--id", "web", "sleep", "3600"}, wantOut: "added deployment \"web\" (enabled)\n"},
		{args: []string{"add", "--id", "agent", "--type", "daemon", "--disabled", "--env", "A=1", "sleep", "60"}, wantOut: "added daemon \"agent\" (disabled)\n"},
		{args: []string{"add", "--id", "web", "sleep", "1"}, wantCode: exitError, wantErrHas: "exists"},
		{args: []string{"add", "--id", "x", "--type", "cron", "sleep"}, wantCode: exitUsage, wantErrHas: "ERR_INVALID_TYPE"},
		{args: []string{"add", "--id", "x", "--type", "daemon", "--address", "a", "sleep"}, wantCode: exitUsage, wantErrHas: "ERR_DAEMON_ADDRESS_SET"},
		{args: []string{"disable", "web"}, wantOut: "disabled \"web\"\n"},
		{args: []string{"enable", "agent"}, wantOut: "enabled \"agent\"\n"},
		{args: []string{"enable", "nope"}, wantCode: exitError, wantErrHas: "not found"},
		{args: []string{"enable"}, wantCode: exitUsage, wantErrHas: "no deployment id"},
		{args: []string{"list"}, wantOut: "ID     TYPE        ENABLED  ADDRESS  COMMAND\nweb    deployment  false    -        sleep 3600\nagent  daemon      true     -        sleep 60\n"},
		{args: []string{"nodes"}, wantOut: "ADDRESS  DEPLOYMENTS  STARTED  LAST_SEEN  USAGE_ENDPOINT\n"},
		{args: []string{"remove", "web"}, wantOut: "removed \"web\"\n"},
		{args: []string{"list"}, wantOut: "ID     TYPE    ENABLED  ADDRESS  COMMAND\nagent  daemon  true     -        sleep 60\n"},
		{args: []string{"remove", "web"}, wantCode: exitError, wantErrHas: "not found"},
		{args: []string{"list", "extra"}, wantCode: exitUsage, wantErrHas: "unexpected argument"},
	}
	for _, s := range steps {
		code, out, errOut := runCmd(env, s.args...)
		if code != s.wantCode {
			t.Errorf("nodeunit %s: exit %d, want %d (stderr %q)", strings.Join(s.args, " "), code, s.wantCode, errOut)
			continue
		}
		if s.wantErrHas != "" {
			if !strings.Contains(errOut, s.wantErrHas) {
				t.Errorf("nodeunit %s: stderr %q, want it to contain %q", strings.Join(s.args, " "), errOut, s.wantErrHas)
			}
			continue
		}
		if diff := cmp.Diff(s.wantOut, out); diff != "" {
			t.Errorf("nodeunit %s (-want +got):\n%s", strings.Join(s.args, " "), diff)
		}
	}
}

func TestAdminSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exerciseAdmin(t, map[string]string{"NODE_UNIT_DATA": filepath.Join(dir, "data")})
}

func TestAdminPostgres(t *testing.T) {
	t.Parallel()
	// A schema of its own: opening the store would migrate the public schema.
	_, u := testenv.PostgresSchema(t)
	exerciseAdmin(t, map[string]string{"DATABASE_URL": u})
}

func TestCommandErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"unknown command", nil, []string{"deploy"}, exitUsage, `unknown command "deploy"`},
		{"bad database url", map[string]string{"DATABASE_URL": "mysql://x/y"}, []string{"list"}, exitUsage, "DATABASE_URL"},
		{"bad log level", map[string]string{"LOG_LEVEL": "loud"}, []string{"list"}, exitUsage, "LOG_LEVEL"},
		{"bad variable stops run", map[string]string{"NODE_UNIT_CLAIM_POLICY": "random"}, []string{"run"}, exitUsage, "NODE_UNIT_CLAIM_POLICY"},
		{"run takes no arguments", nil, []string{"run", "now"}, exitUsage, "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runCmd(tt.env, tt.args...)
			if code != tt.wantCode || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, tt.wantCode, tt.wantErr)
			}
		})
	}
}

func TestRunListenInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	env := map[string]string{"NODE_UNIT_DATA": filepath.Join(t.TempDir(), "data"), "NODE_UNIT_LISTEN": ln.Addr().String()}
	code, _, errOut := runCmd(env, "run")
	if code != exitUsage || !strings.Contains(errOut, "NODE_UNIT_LISTEN") {
		t.Errorf("exit %d, stderr %q; want exit %d naming NODE_UNIT_LISTEN", code, errOut, exitUsage)
	}
	// The failed start released its address file: the next one takes it.
	slot, err := claimAddress(env["NODE_UNIT_DATA"], generateAddress)
	if err != nil {
		t.Fatal(err)
	}
	defer slot.Close()
	if filepath.Base(slot.Path) != "nodeunit-address" {
		t.Errorf("address file after a failed start = %s, want nodeunit-address", filepath.Base(slot.Path))
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"help"}, {"run", "-h"}, {"add", "-h"}, {"list", "--help"}} {
		code, out, _ := runCmd(nil, args...)
		if code != exitOK || !strings.Contains(out, "NODE_UNIT_TRUSTED_COMMAND_REGEXP") || !strings.Contains(out, "nodeunit add --id ID") {
			t.Errorf("nodeunit %s: exit %d, output without the usage:\n%s", strings.Join(args, " "), code, out)
		}
	}
}
