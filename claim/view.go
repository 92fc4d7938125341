package claim

import (
	"context"
	"time"
)

// Viewer is an optional capability of a [Store] that keeps the membership in
// the same database as the deployments. With it a cycle reads what it
// decides from instead of every enabled row: the active node-units, the
// number of deployments bound to each address, whether any deployment is
// unassigned, the versions of the rows this node runs, those rows in full
// only when they changed, and the few candidates it may claim. What a cycle
// reads then grows with the number of node-units and with what changed,
// not with the size of the table.
//
// [New] uses a Viewer when the store implements it and Shares reports that
// the [Membership] given to New is the one View heartbeats into; otherwise
// the loop reads every enabled row with [Store.Deployments].
type Viewer interface {
	// Shares reports whether m is the membership kept beside the
	// deployments, the one View heartbeats into.
	Shares(m Membership) bool
	// View starts one consistent read of the deployments and the
	// membership (one REPEATABLE READ transaction on PostgreSQL, one
	// transaction on SQLite), heartbeats self into the membership in it
	// (as [Membership.Heartbeat] does), and reads the [Summary]. The
	// active node-units carry their UsageEndpoint only when endpoints is
	// true. The heartbeat is stored when [View.Commit] succeeds. The
	// caller calls Close when done.
	View(ctx context.Context, self NodeUnit, ttl time.Duration, endpoints bool) (View, error)
}

// View is one cycle's consistent read, opened by [Viewer.View]. Its methods
// are called from one goroutine. Until Commit every read sees the same
// state of the database; after Commit each method is one statement of its
// own.
type View interface {
	// Summary returns what View read.
	Summary() Summary
	// Versions returns the id and UpdatedAt of every enabled deployment of
	// type deployment bound to address and of every enabled row whose type
	// is not "deployment" (the daemons and the rows of invalid type), in
	// any order. The loop reads a row in full again only when its
	// UpdatedAt changed, so a Viewer's store must move updated_at on every
	// update of a row (store/sqlstore does so with a trigger).
	Versions(ctx context.Context, address string) ([]Version, error)
	// Get returns the enabled rows among ids, in full and as stored (a row
	// of invalid type included), in any order. No ids: no statement.
	Get(ctx context.Context, ids []string) ([]Deployment, error)
	// CountCandidates returns how many enabled deployments of type
	// deployment are unassigned or bound to an address in lost, counting at
	// most limit.
	CountCandidates(ctx context.Context, lost []string, limit int) (int, error)
	// Candidates returns the candidates of ranks offset to offset+limit-1
	// in claim order: the enabled deployments of type deployment bound to
	// an address in lost, then the unassigned ones, each group by
	// updated_at, created_at and id ascending (see [Candidates]).
	Candidates(ctx context.Context, lost []string, offset, limit int) ([]Deployment, error)
	// Commit ends the consistent read and stores the heartbeat.
	Commit(ctx context.Context) error
	// Close ends the view; before Commit it discards the heartbeat. It is
	// safe to call after Commit and more than once.
	Close() error
}

// Summary is what [Viewer.View] reads at the start of a cycle.
type Summary struct {
	// Active are the active node-units, this node included, with Address
	// (and UsageEndpoint when asked for) filled in.
	Active []NodeUnit
	// Bound maps every address that enabled deployments of type deployment
	// are bound to, to their number; an address with none is absent.
	// Daemons, rows of invalid type and rows without an id are not
	// counted. The addresses in Bound and not in Active are the missing
	// node-units.
	Bound map[string]int
	// Unassigned reports whether an enabled deployment of type deployment
	// has no address.
	Unassigned bool
}

// Version identifies one state of a row: a row whose UpdatedAt differs from
// the one a node holds has changed since it read it.
type Version struct {
	// ID is the row's id.
	ID string
	// UpdatedAt is the row's updated_at, which every update moves.
	UpdatedAt time.Time
}

// Partial is what a cycle knows of the deployment table when it reads a
// [Summary] and a window of candidates instead of every enabled row. Set as
// [Inputs].Partial, it makes [Plan] and [ClaimWindow] count, find lost
// node-units and pick candidates from it; [Inputs].Deployments then holds
// only the rows the node runs or must report: its own deployments of type
// deployment, every enabled daemon and every enabled row of invalid type.
type Partial struct {
	// Bound and Unassigned are [Summary.Bound] and [Summary.Unassigned].
	Bound      map[string]int
	Unassigned bool
	// Counted reports that Total holds the number of candidates, counted
	// up to the limit [ClaimWindow] asked for ([Window.CountUpTo]); it is
	// needed only with MaxClaimsPerCycle above 1.
	Counted bool
	Total   int
	// Candidates are the candidates read, in claim order, the first of
	// them at rank Offset of the whole candidate list.
	Offset     int
	Candidates []Deployment
}

// Window says which candidates a cycle with a [Partial] must read before
// [Plan] can decide.
type Window struct {
	// Lost are the addresses whose deployments may be taken over now, the
	// lost argument of [View.CountCandidates] and [View.Candidates].
	Lost []string
	// CountUpTo, when above 0, asks for the number of candidates, counted
	// up to CountUpTo, in Partial.Total (with Partial.Counted set); then
	// ClaimWindow is called again.
	CountUpTo int
	// Offset and Limit are the ranks of the candidates to read into
	// Partial.Offset and Partial.Candidates; Limit 0 means none.
	Offset, Limit int
}
