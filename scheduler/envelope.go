package scheduler

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MessageType is the type word of an [Envelope]: the "type" field of the
// JSON messages nodes and sessions exchange with a dispatch instance, and of
// the messages instances send each other through their inboxes.
type MessageType string

// The message types.
const (
	// TypeJobAssign: dispatcher → node. Run the job (job_id, attempt,
	// session_id, turn_id, pool, model, payload).
	TypeJobAssign MessageType = "job_assign"
	// TypeJobCancel: dispatcher → node. Stop the job's attempt: it failed
	// over to another node or timed out; a result for it will be refused.
	TypeJobCancel MessageType = "job_cancel"
	// TypeJobAck: node → dispatcher. The node received and queued the job.
	TypeJobAck MessageType = "job_ack"
	// TypeJobStarted: node → dispatcher. The node started the job.
	TypeJobStarted MessageType = "job_started"
	// TypeASRPartial: node → dispatcher. A partial result; it also counts as
	// job_started for nodes that send no job_started.
	TypeASRPartial MessageType = "asr_partial"
	// TypeJobResult: node → dispatcher (the job's result, payload), and
	// dispatcher → session (the answer to a request).
	TypeJobResult MessageType = "job_result"
	// TypeModelNotAvailable: node → dispatcher. The node cannot run the
	// job's model; the job goes to another node.
	TypeModelNotAvailable MessageType = "model_not_available"
	// TypeJobFailed: dispatcher → session. The request failed (error names
	// why: every attempt failed, no node could take it, it timed out).
	TypeJobFailed MessageType = "job_failed"
)

// EnvelopeVersion is the version of the inbox message format, written in
// the "v" field of every message an instance sends. A message with another
// version is malformed for this instance.
const EnvelopeVersion = "1"

// Envelope is one message of the dispatch protocol: what nodes and sessions
// send and receive, and what instances route to each other through their
// inboxes. Which fields a type needs is checked by [Envelope.Validate].
type Envelope struct {
	Type      MessageType `json:"type"`
	JobID     string      `json:"job_id,omitempty"`
	Attempt   int         `json:"attempt,omitempty"`
	NodeID    string      `json:"node_id,omitempty"`
	SessionID string      `json:"session_id,omitempty"`
	RequestID string      `json:"request_id,omitempty"`
	TurnID    string      `json:"turn_id,omitempty"`
	Pool      string      `json:"pool,omitempty"`
	Model     string      `json:"model,omitempty"`
	// Reason is the finalize reason of a request (manual, timeout,
	// max_duration), or the reason of a job_cancel.
	Reason string `json:"reason,omitempty"`
	// Payload is opaque to the dispatcher: the job's input on job_assign,
	// its output on job_result.
	Payload []byte `json:"payload,omitempty"`
	// Error says why, on job_failed and model_not_available. On
	// job_failed it begins with the reason's code and a colon:
	// [FailNoNode], [FailQueueFull], [FailAttempts] or [FailTimeout].
	Error string `json:"error,omitempty"`
	// Hops counts how often instances passed the message on; an instance
	// that gets a message it cannot deliver passes it on at most once more,
	// so stale owner bindings cannot bounce it for ever. Not part of the
	// JSON that nodes and sessions see.
	Hops int `json:"-"`
}

// Field names of an envelope in an inbox entry.
const (
	fieldVersion   = "v"
	fieldType      = "type"
	fieldJobID     = "job_id"
	fieldAttempt   = "attempt"
	fieldNodeID    = "node_id"
	fieldSessionID = "session_id"
	fieldRequestID = "request_id"
	fieldTurnID    = "turn_id"
	fieldPool      = "pool"
	fieldModel     = "model"
	fieldReason    = "reason"
	fieldPayload   = "payload" // base64 (standard, padded)
	fieldError     = "error"
	fieldHops      = "hops"
)

// Limits on envelope fields.
const (
	// MaxIDLen bounds every id (job, node, session, request, turn) and the
	// pool, model and reason words.
	MaxIDLen = 128
	// MaxPayload bounds the payload of one message.
	MaxPayload = 1 << 20
	// MaxErrorLen bounds the error text.
	MaxErrorLen = 1024
)

// ErrBadMessage is wrapped by every error of [Envelope.Validate].
var ErrBadMessage = errors.New("bad message")

// MessageError names the field of an envelope that is wrong.
type MessageError struct {
	Field  string // the JSON field, such as "job_id"
	Reason string
}

// Error returns "<field>: <reason>".
func (e *MessageError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap returns [ErrBadMessage].
func (e *MessageError) Unwrap() error { return ErrBadMessage }

func msgErr(field, format string, args ...any) error {
	return &MessageError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// CheckID validates an id a user or a peer supplies: 1 to [MaxIDLen] bytes
// of printable ASCII other than space, '{' and '}' (ids end up in Redis
// keys, where braces would change the Redis Cluster slot). name is the
// field reported in the [*MessageError].
func CheckID(name, id string) error {
	if id == "" {
		return msgErr(name, "required")
	}
	if len(id) > MaxIDLen {
		return msgErr(name, "longer than %d bytes", MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f || c == '{' || c == '}' {
			return msgErr(name, "%q: only printable ASCII without spaces or braces", id)
		}
	}
	return nil
}

func checkOptID(name, id string) error {
	if id == "" {
		return nil
	}
	return CheckID(name, id)
}

// Validate checks that e carries the fields its type needs, each well
// formed. The error is a [*MessageError] naming the field.
func (e Envelope) Validate() error {
	need := func(names ...string) error {
		for _, n := range names {
			var v string
			switch n {
			case fieldJobID:
				v = e.JobID
			case fieldNodeID:
				v = e.NodeID
			case fieldSessionID:
				v = e.SessionID
			case fieldRequestID:
				v = e.RequestID
			}
			if err := CheckID(n, v); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	switch e.Type {
	case TypeJobAssign:
		err = need(fieldJobID, fieldNodeID)
	case TypeJobCancel:
		err = need(fieldJobID, fieldNodeID)
	case TypeJobAck, TypeJobStarted, TypeASRPartial, TypeJobResult, TypeModelNotAvailable:
		err = need(fieldJobID)
	case TypeJobFailed:
		err = need(fieldJobID)
	case "":
		return msgErr(fieldType, "required")
	default:
		return msgErr(fieldType, "unknown type %q", e.Type)
	}
	if err != nil {
		return err
	}
	switch e.Type {
	case TypeJobAssign, TypeJobCancel, TypeJobAck, TypeJobStarted, TypeASRPartial, TypeJobResult, TypeModelNotAvailable:
		if e.Attempt < 1 {
			return msgErr(fieldAttempt, "must be at least 1, got %d", e.Attempt)
		}
	}
	for _, f := range []struct{ name, v string }{
		{fieldJobID, e.JobID}, {fieldNodeID, e.NodeID}, {fieldSessionID, e.SessionID},
		{fieldRequestID, e.RequestID}, {fieldTurnID, e.TurnID}, {fieldPool, e.Pool},
		{fieldModel, e.Model}, {fieldReason, e.Reason},
	} {
		if err := checkOptID(f.name, f.v); err != nil {
			return err
		}
	}
	if e.Attempt < 0 {
		return msgErr(fieldAttempt, "negative")
	}
	if len(e.Payload) > MaxPayload {
		return msgErr(fieldPayload, "%d bytes, more than %d", len(e.Payload), MaxPayload)
	}
	if len(e.Error) > MaxErrorLen || !utf8.ValidString(e.Error) {
		return msgErr(fieldError, "longer than %d bytes or not UTF-8", MaxErrorLen)
	}
	return nil
}

// Fields encodes e as the fields of an inbox entry, with the format version
// in "v" first. Empty fields are left out.
func (e Envelope) Fields() Fields {
	return e.AppendFields(make(Fields, 0, 14))
}

// AppendFields appends the fields of [Envelope.Fields] to dst and returns
// the extended slice, so that a caller can reuse one buffer.
func (e Envelope) AppendFields(dst Fields) Fields {
	dst = append(dst, Field{fieldVersion, EnvelopeVersion}, Field{fieldType, string(e.Type)})
	put := func(k, v string) {
		if v != "" {
			dst = append(dst, Field{k, v})
		}
	}
	put(fieldJobID, e.JobID)
	if e.Attempt != 0 {
		dst = append(dst, Field{fieldAttempt, strconv.Itoa(e.Attempt)})
	}
	put(fieldNodeID, e.NodeID)
	put(fieldSessionID, e.SessionID)
	put(fieldRequestID, e.RequestID)
	put(fieldTurnID, e.TurnID)
	put(fieldPool, e.Pool)
	put(fieldModel, e.Model)
	put(fieldReason, e.Reason)
	if len(e.Payload) > 0 {
		dst = append(dst, Field{fieldPayload, base64.StdEncoding.EncodeToString(e.Payload)})
	}
	put(fieldError, e.Error)
	if e.Hops > 0 {
		dst = append(dst, Field{fieldHops, strconv.Itoa(e.Hops)})
	}
	return dst
}

// DecodeEnvelope decodes the fields of an inbox entry written by
// [Envelope.Fields] and validates the result. Anything else (another
// version, an unknown field, a bad attempt or payload, a failed
// [Envelope.Validate]) is an error wrapping [ErrMalformed], so that the
// [Deliverer] moves the entry to the dead-letter queue instead of retrying
// it.
func DecodeEnvelope(fields Fields) (Envelope, error) {
	bad := func(err error) (Envelope, error) {
		return Envelope{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if v := fields.Get(fieldVersion); v != EnvelopeVersion {
		return bad(msgErr(fieldVersion, "version %q, want %q", v, EnvelopeVersion))
	}
	var e Envelope
	for _, f := range fields {
		k, v := f.Name, f.Value
		switch k {
		case fieldVersion:
		case fieldType:
			e.Type = MessageType(v)
		case fieldJobID:
			e.JobID = v
		case fieldAttempt:
			n, err := strconv.Atoi(v)
			if err != nil {
				return bad(msgErr(fieldAttempt, "%q is not a number", v))
			}
			e.Attempt = n
		case fieldNodeID:
			e.NodeID = v
		case fieldSessionID:
			e.SessionID = v
		case fieldRequestID:
			e.RequestID = v
		case fieldTurnID:
			e.TurnID = v
		case fieldPool:
			e.Pool = v
		case fieldModel:
			e.Model = v
		case fieldReason:
			e.Reason = v
		case fieldPayload:
			p, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				return bad(msgErr(fieldPayload, "not base64: %v", err))
			}
			e.Payload = p
		case fieldError:
			e.Error = v
		case fieldHops:
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return bad(msgErr(fieldHops, "%q is not a count", v))
			}
			e.Hops = n
		default:
			return bad(msgErr(k, "unknown field"))
		}
	}
	if err := e.Validate(); err != nil {
		return bad(err)
	}
	return e, nil
}
