package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/store/sqlstore"
)

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// adminTimeout bounds an admin sub-command's database work.
const adminTimeout = 30 * time.Second

// withDB opens the database for an admin sub-command that writes (creating
// or migrating the tables) and runs f.
func withDB(name string, getenv func(string) string, stderr io.Writer, f func(ctx context.Context, db *sqlstore.DB) error) int {
	c, err := loadBase(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "nodeunit %s: %v\n", name, err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	db, err := openDB(ctx, c)
	if err != nil {
		fmt.Fprintf(stderr, "nodeunit %s: %v\n", name, err)
		return exitUsage
	}
	defer db.Close()
	if err := f(ctx, db); err != nil {
		fmt.Fprintf(stderr, "nodeunit %s: %v\n", name, err)
		return exitError
	}
	return exitOK
}

// withReadDB runs f for an admin sub-command that only reads: it neither
// creates the database, its directory or its tables, nor migrates them.
// Where there is nothing to read yet (no database file, or no tables) it
// says so and fails with exitError.
func withReadDB(name string, getenv func(string) string, stderr io.Writer, f func(ctx context.Context, c baseConfig, db *sqlstore.DB) error) int {
	c, err := loadBase(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "nodeunit %s: %v\n", name, err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	db, err := connectDB(ctx, c)
	if err != nil {
		fmt.Fprintf(stderr, "nodeunit %s: %v\n", name, err)
		if errors.Is(err, errNoDatabase) {
			return exitError
		}
		return exitUsage
	}
	defer db.Close()
	if err := f(ctx, c, db); err != nil {
		fmt.Fprintf(stderr, "nodeunit %s: %v\n", name, err)
		return exitError
	}
	return exitOK
}

// parseAdd turns add's arguments into a deployment, validated as the claim
// loop will read it.
func parseAdd(args []string) (claim.Deployment, error) {
	fs := newFlags("add")
	var d claim.Deployment
	var typ, command string
	var argv, env listFlag
	var disabled bool
	fs.StringVar(&d.ID, "id", "", "")
	fs.StringVar(&typ, "type", string(claim.TypeDeployment), "")
	fs.StringVar(&command, "command", "", "")
	fs.Var(&argv, "arg", "")
	fs.Var(&env, "env", "")
	fs.StringVar(&d.Address, "address", "", "")
	fs.StringVar(&d.PackageName, "package", "", "")
	fs.StringVar(&d.PackageVersion, "version", "", "")
	fs.BoolVar(&disabled, "disabled", false, "")
	if err := fs.Parse(args); err != nil {
		return d, err
	}
	rest := fs.Args()
	switch {
	case command != "" && len(rest) > 0:
		return d, fmt.Errorf("give the command either with --command or after the flags, not both (got --command %q and %q)", command, rest[0])
	case command == "" && len(rest) == 0:
		return d, fmt.Errorf("no command: nodeunit add --id ID [flags] COMMAND [ARG...]")
	case command == "":
		command, rest = rest[0], rest[1:]
	}
	if len(argv) > 0 && len(rest) > 0 {
		return d, fmt.Errorf("give the arguments either with --arg or after the command, not both")
	}
	d.Command = command
	d.Args = append([]string(argv), rest...)
	if len(env) > 0 {
		d.Env = make(map[string]string, len(env))
		for _, kv := range env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" || strings.ContainsAny(k, "\x00") {
				return d, fmt.Errorf("--env %q: want KEY=VALUE", kv)
			}
			d.Env[k] = v
		}
	}
	d.Type = claim.Type(typ)
	d.Enabled = !disabled
	if d.ID == "" {
		return d, fmt.Errorf("--id is required")
	}
	if d.Type == claim.TypeDaemon && d.Address != "" {
		return d, &codedError{
			// Worded as claim's coded errors are: "claim: CODE: deployment ...".
			msg: fmt.Sprintf("claim: %s: deployment %q: --address is for type deployment only: a daemon runs on every node-unit and has no address", claim.CodeDaemonAddressSet, d.ID),
			err: claim.ErrDaemonAddressSet,
		}
	}
	if err := d.Validate(); err != nil {
		return d, err
	}
	return d, nil
}

func cmdAdd(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	d, err := parseAdd(args)
	if code, done := flagError("add", err, stdout, stderr); done {
		return code
	}
	return withDB("add", getenv, stderr, func(ctx context.Context, db *sqlstore.DB) error {
		if err := db.Deployments().Add(ctx, d); err != nil {
			return err
		}
		state := "enabled"
		if !d.Enabled {
			state = "disabled"
		}
		fmt.Fprintf(stdout, "added %s %q (%s)\n", d.Type, d.ID, state)
		if re := trustedRegexp(getenv); re != nil && !re.MatchString(d.Command) {
			fmt.Fprintf(stderr, "nodeunit add: warning: command %q does not match NODE_UNIT_TRUSTED_COMMAND_REGEXP %q: node-units with this setting will not run it (nodeunit status shows which do)\n",
				d.Command, getenv("NODE_UNIT_TRUSTED_COMMAND_REGEXP"))
		}
		return nil
	})
}

// codedError is a message of its own over a claim sentinel.
type codedError struct {
	msg string
	err error
}

func (e *codedError) Error() string { return e.msg }
func (e *codedError) Unwrap() error { return e.err }

// flagError reports a parse error of a sub-command (or prints the help for
// -h).
func flagError(name string, err error, stdout, stderr io.Writer) (int, bool) {
	if err == nil {
		return 0, false
	}
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout)
		return exitOK, true
	}
	fmt.Fprintf(stderr, "nodeunit %s: %v\n", name, err)
	return exitUsage, true
}

// ids parses the ID... arguments of enable, disable and remove.
func ids(name string, args []string, stdout, stderr io.Writer) ([]string, int, bool) {
	fs := newFlags(name)
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return nil, code, true
	}
	if fs.NArg() == 0 {
		fmt.Fprintf(stderr, "nodeunit %s: no deployment id: nodeunit %s ID...\n", name, name)
		return nil, exitUsage, true
	}
	return fs.Args(), 0, false
}

func cmdSetEnabled(name string, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	list, code, done := ids(name, args, stdout, stderr)
	if done {
		return code
	}
	return withDB(name, getenv, stderr, func(ctx context.Context, db *sqlstore.DB) error {
		for _, id := range list {
			if err := db.Deployments().SetEnabled(ctx, id, name == "enable"); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%sd %q\n", name, id)
		}
		return nil
	})
}

func cmdRemove(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	list, code, done := ids("remove", args, stdout, stderr)
	if done {
		return code
	}
	return withDB("remove", getenv, stderr, func(ctx context.Context, db *sqlstore.DB) error {
		for _, id := range list {
			if err := db.Deployments().Delete(ctx, id); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "removed %q\n", id)
		}
		return nil
	})
}

func noArgs(name string, args []string, stdout, stderr io.Writer) (int, bool) {
	fs := newFlags(name)
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "nodeunit %s: unexpected argument %q\n", name, fs.Arg(0))
		return exitUsage, true
	}
	return 0, false
}

func cmdList(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if code, done := noArgs("list", args, stdout, stderr); done {
		return code
	}
	return withReadDB("list", getenv, stderr, func(ctx context.Context, _ baseConfig, db *sqlstore.DB) error {
		ds, err := listDeployments(ctx, db)
		if err != nil {
			return err
		}
		writeList(stdout, ds)
		return nil
	})
}

// writeList prints deployments as a table; an unassigned address is "-".
func writeList(w io.Writer, ds []claim.Deployment) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTYPE\tENABLED\tADDRESS\tCOMMAND")
	for _, d := range ds {
		addr := d.Address
		if addr == "" {
			addr = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%s\n", d.ID, d.Type, d.Enabled, addr, commandLine(d))
	}
	tw.Flush()
}

// commandLine shows a command and its arguments, quoting words that need it.
func commandLine(d claim.Deployment) string {
	words := append([]string{d.Command}, d.Args...)
	for i, w := range words {
		if w == "" || strings.ContainsAny(w, " \t\n\"'\\$`") {
			words[i] = strconv.Quote(w)
		}
	}
	return strings.Join(words, " ")
}

func cmdNodes(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if code, done := noArgs("nodes", args, stdout, stderr); done {
		return code
	}
	return withReadDB("nodes", getenv, stderr, func(ctx context.Context, c baseConfig, db *sqlstore.DB) error {
		nodes, err := activeNodes(ctx, c, db)
		if err != nil {
			return err
		}
		ds, err := listDeployments(ctx, db)
		if err != nil {
			return err
		}
		counts := map[string]int{}
		for _, d := range ds {
			if d.Enabled && d.Type == claim.TypeDeployment && d.Address != "" {
				counts[d.Address]++
			}
		}
		slices.SortFunc(nodes, func(a, b claim.NodeUnit) int { return strings.Compare(a.Address, b.Address) })
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ADDRESS\tDEPLOYMENTS\tSTARTED\tLAST_SEEN\tUSAGE_ENDPOINT")
		for _, n := range nodes {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", n.Address, counts[n.Address],
				n.StartedAt.Local().Format(time.DateTime), n.LastSeen.Local().Format(time.DateTime), n.UsageEndpoint)
		}
		return tw.Flush()
	})
}

// listDeployments lists every deployment.
func listDeployments(ctx context.Context, db *sqlstore.DB) ([]claim.Deployment, error) {
	return db.Deployments().List(ctx)
}

// activeNodes lists the active node-units.
func activeNodes(ctx context.Context, c baseConfig, db *sqlstore.DB) ([]claim.NodeUnit, error) {
	return db.Membership().Active(ctx, c.ttl())
}

// trustedRegexp is NODE_UNIT_TRUSTED_COMMAND_REGEXP anchored as the
// node-units apply it, or nil when it is unset or does not compile.
func trustedRegexp(getenv func(string) string) *regexp.Regexp {
	v := getenv("NODE_UNIT_TRUSTED_COMMAND_REGEXP")
	if v == "" {
		return nil
	}
	re, err := regexp.Compile(`^(?:` + v + `)$`)
	if err != nil {
		return nil
	}
	return re
}
