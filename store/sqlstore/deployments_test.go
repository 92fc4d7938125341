package sqlstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ksana-dev/ksana/claim"
)

func TestAdminOperations(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := b.open(t).Deployments()
			web := claim.Deployment{ID: "web", Command: "/usr/bin/web", Args: []string{"-p", "80"},
				Env: map[string]string{"MODE": "prod"}, PackageName: "web", PackageVersion: "1.2.3"}
			agent := claim.Deployment{ID: "agent", Type: claim.TypeDaemon, Enabled: true, Command: "/usr/bin/agent"}
			adds := []struct {
				name string
				d    claim.Deployment
				want error
			}{
				{"deployment, type defaulted", web, nil},
				{"daemon", agent, nil},
				{"same id again", claim.Deployment{ID: "web", Command: "other"}, ErrExists},
				{"empty id", claim.Deployment{Command: "x"}, claim.ErrInvalidDeployment},
				{"invalid type", claim.Deployment{ID: "x", Type: "cronjob"}, claim.ErrInvalidType},
				{"daemon with address", claim.Deployment{ID: "y", Type: claim.TypeDaemon, Address: "n1"}, claim.ErrDaemonAddressSet},
			}
			for _, tt := range adds {
				if err := s.Add(ctx, tt.d); !errors.Is(err, tt.want) {
					t.Errorf("%s: Add = %v, want %v", tt.name, err, tt.want)
				}
			}
			if got, err := s.Get(ctx, "web"); err != nil || got.Command != "/usr/bin/web" {
				t.Errorf("Get(web) after a refused duplicate = %+v, %v; want the first row kept", got, err)
			}

			if err := s.SetEnabled(ctx, "web", true); err != nil {
				t.Fatalf("SetEnabled(web, true): %v", err)
			}
			for _, tt := range []struct {
				name string
				err  error
			}{
				{"SetEnabled(missing)", s.SetEnabled(ctx, "missing", true)},
				{"Delete(missing)", s.Delete(ctx, "missing")},
				{"Get(missing)", func() error { _, err := s.Get(ctx, "missing"); return err }()},
			} {
				if !errors.Is(tt.err, ErrNotFound) || !strings.Contains(tt.err.Error(), `"missing"`) {
					t.Errorf("%s = %v, want ErrNotFound naming the id", tt.name, tt.err)
				}
			}

			all, err := s.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			web.Type, web.Enabled = claim.TypeDeployment, true
			want := []claim.Deployment{web, agent}
			opts := cmp.Options{cmpopts.IgnoreFields(claim.Deployment{}, "CreatedAt", "UpdatedAt"), cmpopts.SortSlices(func(a, b claim.Deployment) bool { return a.ID < b.ID })}
			if diff := cmp.Diff(want, all, opts); diff != "" {
				t.Errorf("List mismatch (-want +got):\n%s", diff)
			}
			for _, d := range all {
				if d.CreatedAt.IsZero() || d.UpdatedAt.Before(d.CreatedAt) {
					t.Errorf("%s: created_at %v, updated_at %v: want both set by the database", d.ID, d.CreatedAt, d.UpdatedAt)
				}
			}

			if err := s.SetEnabled(ctx, "agent", false); err != nil {
				t.Fatal(err)
			}
			enabled, err := s.Deployments(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(enabled) != 1 || enabled[0].ID != "web" {
				t.Errorf("Deployments after disabling agent = %v, want only web", enabled)
			}
			if err := s.Delete(ctx, "web"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(ctx, "web"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get(web) after Delete = %v, want ErrNotFound", err)
			}
		})
	}
}

// TestUpdatedAtOnEveryUpdate: every update moves updated_at, whether the
// statement sets it (claims, SetEnabled) or not (an UPDATE by hand).
func TestUpdatedAtOnEveryUpdate(t *testing.T) {
	t.Parallel()
	past := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := b.open(t)
			s := db.Deployments()
			updates := []struct {
				name string
				do   func() error
			}{
				{"UPDATE by hand", func() error {
					_, err := db.x.ExecContext(ctx, db.d.sql("UPDATE deployment SET command = 'changed' WHERE id = 'd'"))
					return err
				}},
				{"SetEnabled", func() error { return s.SetEnabled(ctx, "d", true) }},
				{"Claim", func() error { _, err := s.Claim(ctx, "d", "n1", nil); return err }},
				{"Release", func() error { _, err := s.Release(ctx, "d", "n1"); return err }},
				{"ClaimMany", func() error { _, err := s.ClaimMany(ctx, []string{"d"}, "n1", nil); return err }},
			}
			if err := s.Add(ctx, claim.Deployment{ID: "d", Enabled: true}); err != nil {
				t.Fatal(err)
			}
			for _, tt := range updates {
				exec(t, db, "UPDATE deployment SET updated_at = ? WHERE id = 'd'", db.d.timeArg(past))
				if err := tt.do(); err != nil {
					t.Fatalf("%s: %v", tt.name, err)
				}
				d, err := s.Get(ctx, "d")
				if err != nil {
					t.Fatal(err)
				}
				if !d.UpdatedAt.After(past.Add(time.Hour)) {
					t.Errorf("%s: updated_at = %v, want the database's current time", tt.name, d.UpdatedAt)
				}
			}
		})
	}
}

// TestDeploymentTypeRoundTrip: the type column reads back into
// Deployment.Type.
func TestDeploymentTypeRoundTrip(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := b.open(t).Deployments()
			for _, typ := range []claim.Type{claim.TypeDaemon, claim.TypeDeployment} {
				if err := s.Add(ctx, claim.Deployment{ID: string(typ), Type: typ, Enabled: true}); err != nil {
					t.Fatal(err)
				}
			}
			ds, err := s.Deployments(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]claim.Type{}
			for _, d := range ds {
				got[d.ID] = d.Type
			}
			want := map[string]claim.Type{"daemon": claim.TypeDaemon, "deployment": claim.TypeDeployment}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("types read back mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestInvalidTypeRowIsReturned: a row whose type was set by hand to a
// value that is not a type is returned as it is, with the other rows.
func TestInvalidTypeRowIsReturned(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := b.open(t)
			s := db.Deployments()
			for _, id := range []string{"good", "bad"} {
				if err := s.Add(ctx, claim.Deployment{ID: id, Enabled: true}); err != nil {
					t.Fatal(err)
				}
			}
			exec(t, db, "UPDATE deployment SET type = ? WHERE id = ?", "cronjob", "bad")
			ds, err := s.Deployments(ctx)
			if err != nil {
				t.Fatalf("Deployments with an invalid row: %v", err)
			}
			got := map[string]claim.Type{}
			for _, d := range ds {
				got[d.ID] = d.Type
			}
			if diff := cmp.Diff(map[string]claim.Type{"good": claim.TypeDeployment, "bad": "cronjob"}, got); diff != "" {
				t.Errorf("Deployments mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestClaimSQLRequiresTypeDeployment checks the statements the claim
// methods send: each is one conditional UPDATE whose condition requires
// type = 'deployment' (R5, R6, R9), and none of them binds a daemon.
func TestClaimSQLRequiresTypeDeployment(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, rec := openRecorded(t, b)
			s := db.Deployments()
			for _, d := range []claim.Deployment{
				{ID: "dm", Type: claim.TypeDaemon, Enabled: true},
				{ID: "dp", Type: claim.TypeDeployment, Enabled: true},
			} {
				if err := s.Add(ctx, d); err != nil {
					t.Fatal(err)
				}
			}
			exec(t, db, "UPDATE deployment SET address = 'gone' WHERE id = 'dp'")
			rec.take()
			calls := []struct {
				name    string
				do      func() (bool, error)
				want    bool
				wantSQL []string // fragments of the one statement
			}{
				{"Claim(daemon)", func() (bool, error) { return s.Claim(ctx, "dm", "me", []string{"gone"}) }, false,
					[]string{"UPDATE deployment SET address = ", "WHERE id = ", "AND type = 'deployment' AND enabled AND (address = '' OR address IN ("}},
				{"ClaimMany(daemon)", func() (bool, error) {
					got, err := s.ClaimMany(ctx, []string{"dm"}, "me", []string{"gone"})
					return len(got) > 0, err
				}, false, []string{"WHERE id IN (", "AND type = 'deployment' AND enabled AND (address = '' OR address IN (", "RETURNING id"}},
				{"Claim(deployment on lost node)", func() (bool, error) { return s.Claim(ctx, "dp", "me", []string{"gone"}) }, true,
					[]string{"AND type = 'deployment' AND enabled"}},
				{"Release(daemon)", func() (bool, error) { return s.Release(ctx, "dm", "") }, false, nil},
				{"Release(deployment)", func() (bool, error) { return s.Release(ctx, "dp", "me") }, true,
					[]string{"SET address = ''", "WHERE id = ", "AND type = 'deployment' AND address = "}},
			}
			for _, tt := range calls {
				got, err := tt.do()
				if err != nil || got != tt.want {
					t.Errorf("%s = %v, %v; want %v, nil", tt.name, got, err, tt.want)
				}
				stmts := rec.take()
				if tt.wantSQL == nil {
					if len(stmts) != 0 {
						t.Errorf("%s sent %q, want no statement", tt.name, stmts)
					}
					continue
				}
				if len(stmts) != 1 {
					t.Errorf("%s sent %d statements %q, want 1", tt.name, len(stmts), stmts)
					continue
				}
				for _, frag := range tt.wantSQL {
					if !strings.Contains(stmts[0], frag) {
						t.Errorf("%s: statement %q lacks %q", tt.name, stmts[0], frag)
					}
				}
				if strings.Contains(stmts[0], "'me'") || strings.Contains(stmts[0], "'gone'") {
					t.Errorf("%s: statement %q carries a value in its text, want parameters", tt.name, stmts[0])
				}
			}
			if d, _ := s.Get(ctx, "dm"); d.Address != "" {
				t.Errorf("daemon address = %q, want empty", d.Address)
			}
		})
	}
}
