package claim

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Type is the kind of a deployment record: [TypeDeployment] or [TypeDaemon].
// It is stored as TEXT in the deployment table's type column.
type Type string

const (
	// TypeDeployment is a deployment placed on one node-unit through its
	// address: it is claimed, bound, and taken over from lost nodes.
	TypeDeployment Type = "deployment"
	// TypeDaemon is a deployment that every node-unit runs once while it is
	// enabled. It never takes part in claims and never has an address.
	TypeDaemon Type = "daemon"
)

// Valid reports whether t is one of [TypeDeployment] and [TypeDaemon].
func (t Type) Valid() bool { return t == TypeDeployment || t == TypeDaemon }

// Deployment is one row of the deployment table: what the claim loop places
// and what a [Runner] runs.
type Deployment struct {
	// ID is the unique key of the record; it also identifies the local
	// process: a node runs at most one process per ID.
	ID string `json:"id"`
	// Type is "deployment" or "daemon"; the table's default is "deployment".
	Type Type `json:"type"`
	// Enabled records that the deployment should run.
	Enabled bool `json:"enabled"`
	// Address is the node-unit the deployment is bound to; "" means
	// unassigned. Daemons always have "".
	Address string `json:"address"`
	// PackageName and PackageVersion name what is deployed.
	PackageName    string `json:"package_name"`
	PackageVersion string `json:"package_version"`
	// Command, Args and Env describe the process a [Runner] starts.
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// CreatedAt and UpdatedAt are kept by the store; UpdatedAt changes on
	// every update, claims included.
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Validate checks the record as the claim loop reads it: an empty ID is
// [ErrInvalidDeployment], a type other than "daemon" or "deployment" is
// ERR_INVALID_TYPE ([ErrInvalidType]), and a daemon with a non-empty address
// is ERR_DAEMON_ADDRESS_SET ([ErrDaemonAddressSet]). The error is an
// [*Error].
func (d Deployment) Validate() error {
	switch {
	case d.ID == "":
		return &Error{Code: "", Field: "id", Err: ErrInvalidDeployment}
	case !d.Type.Valid():
		return &Error{Code: CodeInvalidType, ID: d.ID, Field: "type", Value: string(d.Type), Err: ErrInvalidType}
	case d.Type == TypeDaemon && d.Address != "":
		return &Error{Code: CodeDaemonAddressSet, ID: d.ID, Field: "address", Value: d.Address, Err: ErrDaemonAddressSet}
	}
	return nil
}

// NodeUnit is one member of the node-unit membership: a node that runs the
// claim loop.
type NodeUnit struct {
	// Address identifies the node; deployments bound to it carry it.
	Address string `json:"address"`
	// UsageEndpoint is where a [UsageProbe] reads the node's resource usage
	// (for example the URL of its NodeUnit/InspectResourceUsage endpoint).
	UsageEndpoint string `json:"usage_endpoint,omitempty"`
	// StartedAt is when the node's process started.
	StartedAt time.Time `json:"started_at"`
	// LastSeen is the time of the node's latest heartbeat, stamped by the
	// membership store's clock (the database's), never by the node's.
	LastSeen time.Time `json:"last_seen"`
}

// Usage is a node-unit's resource usage, the response of
// NodeUnit/InspectResourceUsage.
type Usage struct {
	// CPUPercent is the CPU of the node-unit process and its deployment
	// processes, relative to the machine's total CPU capacity (0-100).
	CPUPercent float64 `json:"cpu_percent"`
	// MemoryMB is their resident memory in MB.
	MemoryMB float64 `json:"memory_mb"`
}

// Code is a stable error code, such as ERR_INVALID_TYPE, for logs and
// alerts.
type Code string

// The error codes.
const (
	// CodeInvalidType: a record's type is neither "daemon" nor "deployment".
	// The loop skips the record. Needs a data fix.
	CodeInvalidType Code = "ERR_INVALID_TYPE"
	// CodeDaemonAddressSet: a daemon has a non-empty address. The loop
	// ignores the address and runs the daemon. Needs a data fix.
	CodeDaemonAddressSet Code = "ERR_DAEMON_ADDRESS_SET"
	// CodeClaimConflict: a claim's conditional update found the deployment
	// taken by another node first. Retried next cycle.
	CodeClaimConflict Code = "ERR_CLAIM_CONFLICT"
	// CodePolicyDisabled: the policy is none, so claims are skipped. Logged
	// once.
	CodePolicyDisabled Code = "ERR_POLICY_DISABLED"
	// CodeDaemonMissing: an enabled daemon that should be running on this
	// node is not. The loop starts it again.
	CodeDaemonMissing Code = "ERR_DAEMON_MISSING"
)

// Sentinels to branch on with errors.Is. Each [*Error] unwraps to one.
var (
	// ErrInvalidType: ERR_INVALID_TYPE.
	ErrInvalidType = errors.New("claim: " + string(CodeInvalidType))
	// ErrDaemonAddressSet: ERR_DAEMON_ADDRESS_SET.
	ErrDaemonAddressSet = errors.New("claim: " + string(CodeDaemonAddressSet))
	// ErrClaimConflict: ERR_CLAIM_CONFLICT.
	ErrClaimConflict = errors.New("claim: " + string(CodeClaimConflict))
	// ErrPolicyDisabled: ERR_POLICY_DISABLED.
	ErrPolicyDisabled = errors.New("claim: " + string(CodePolicyDisabled))
	// ErrDaemonMissing: ERR_DAEMON_MISSING.
	ErrDaemonMissing = errors.New("claim: " + string(CodeDaemonMissing))
	// ErrInvalidDeployment: a record without an id, or with an id seen
	// before in the same list.
	ErrInvalidDeployment = errors.New("claim: invalid deployment")
	// ErrUnknownPolicy is returned by [ParsePolicy] for a name that is not a
	// policy.
	ErrUnknownPolicy = errors.New("claim: unknown claim policy")
	// ErrInvalidConfig is returned by [New] and the parse helpers for a bad
	// setting; the [*ConfigError] names it.
	ErrInvalidConfig = errors.New("claim: invalid configuration")
	// ErrRefused may be wrapped by a [Runner]'s Start error when it will not
	// run a deployment (for example an untrusted command). The loop logs such
	// a refusal once per deployment version instead of every cycle.
	ErrRefused = errors.New("claim: deployment refused by runner")
)

// Error is an error about one deployment, carrying its [Code] when it has
// one.
type Error struct {
	Code  Code   // the error code, "" when there is none
	ID    string // the deployment's id
	Field string // the offending field: "id", "type", "address"
	Value string // the offending value
	Err   error  // the sentinel, such as ErrInvalidType
}

// Error describes the problem, starting with the code.
func (e *Error) Error() string {
	s := "claim: "
	if e.Code != "" {
		s += string(e.Code) + ": "
	}
	if e.ID != "" {
		s += fmt.Sprintf("deployment %q: ", e.ID)
	}
	switch {
	case e.Err == ErrInvalidDeployment && e.Value == "":
		s += "empty " + e.Field
	case e.Err == ErrInvalidDeployment:
		s += "listed more than once; the first is used"
	case e.Code == CodeInvalidType:
		s += fmt.Sprintf("type %q is neither %q nor %q", e.Value, TypeDaemon, TypeDeployment)
	case e.Code == CodeDaemonAddressSet:
		s += fmt.Sprintf("daemon has address %q; the address is ignored", e.Value)
	case e.Code == CodeClaimConflict:
		s += "claimed by another node first"
	case e.Code == CodeDaemonMissing:
		s += "enabled daemon is not running; starting it again"
	case e.Code == CodePolicyDisabled:
		s += "claim policy is none; claims are skipped"
	default:
		if e.Field != "" {
			s += fmt.Sprintf("%s %q", e.Field, e.Value)
		}
	}
	return s
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// ConfigError names a bad setting: a [Config] field, or the policy name
// given to [ParsePolicy].
type ConfigError struct {
	Name  string // the setting, e.g. "Config.Interval" or "policy"
	Value string // the rejected value
	Err   error  // the reason
}

// Error names the setting, the value and the reason.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("claim: invalid %s %q: %s", e.Name, e.Value, strings.TrimPrefix(fmt.Sprint(e.Err), "claim: "))
}

// Unwrap returns [ErrInvalidConfig] and the reason.
func (e *ConfigError) Unwrap() []error { return []error{ErrInvalidConfig, e.Err} }
