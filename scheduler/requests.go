package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Errors of request idempotency.
var (
	// ErrBindingCorrupt: a stored request binding does not decode. It is
	// left as it is.
	ErrBindingCorrupt = errors.New("corrupt request binding")
	// ErrBindWait: a duplicate request waited its bound for the first
	// request's binding, which did not come.
	ErrBindWait = errors.New("timed out waiting for the request's binding")
)

// RequestBinding is what a request id is bound to: the job made for the
// first request with that id. In Redis it is the JSON of
// {prefix}:v1:requests:binding:<request_id>.
type RequestBinding struct {
	JobID  string `json:"job_id"`            // required
	NodeID string `json:"node_id,omitempty"` // the node chosen, if any
	// Data carries anything else the caller wants every duplicate to see.
	Data json.RawMessage `json:"data,omitempty"`
}

// Validate reports a binding without a job id.
func (b RequestBinding) Validate() error {
	if b.JobID == "" {
		return argErr("job_id", "empty in request binding")
	}
	return nil
}

// EncodeRequestBinding returns b's JSON.
func EncodeRequestBinding(b RequestBinding) ([]byte, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(b)
}

// DecodeRequestBinding parses a stored binding. Anything but one JSON
// object with a non-empty job_id (unknown fields are allowed) is an error
// wrapping [ErrBindingCorrupt].
func DecodeRequestBinding(data []byte) (RequestBinding, error) {
	var b RequestBinding
	// json.Unmarshal rejects data after the object, and costs less than a
	// Decoder on this path, which every duplicate request takes.
	if err := json.Unmarshal(data, &b); err != nil {
		return RequestBinding{}, fmt.Errorf("request binding: %w: %v", ErrBindingCorrupt, err)
	}
	if b.JobID == "" {
		return RequestBinding{}, fmt.Errorf("request binding: %w: job_id is empty", ErrBindingCorrupt)
	}
	return b, nil
}

// RequestStore makes request ids idempotent across instances: however many
// times, and on however many instances at once, a request id arrives, one
// job is made for it and every duplicate gets that job's binding.
// Implementations: [MemRequests]; store/redisstore.Requests. Each passes
// store/storetest.TestRequestStore.
type RequestStore interface {
	// Bind returns the binding of requestID. When there is none it calls
	// create, stores what create returns and returns it with created true.
	// Concurrent calls with one request id call create once: the others
	// wait, bounded by the store's wait timeout and ctx, for the binding
	// and return it with created false ([ErrBindWait] when it does not
	// come). When create fails, Bind returns its error, stores nothing and
	// a waiting duplicate takes over. A stored binding that does not decode
	// is [ErrBindingCorrupt].
	//
	// A store whose lock expires (Redis) can call create twice for one
	// request id when create outlasts the lock or a caller stalls past
	// it; every caller still returns the one stored binding. So that a
	// second call makes no second job, create must be idempotent: derive
	// the job id from the request id ([JobIDFor]) and create the job with
	// an operation that creates once ([JobBook.Open], [JobStore.CreateJob]),
	// as the [Dispatcher] does.
	Bind(ctx context.Context, requestID string, create func(ctx context.Context) (RequestBinding, error)) (b RequestBinding, created bool, err error)
}

// CheckBind validates the arguments of [RequestStore.Bind].
func CheckBind(requestID string, create func(ctx context.Context) (RequestBinding, error)) error {
	if err := checkID("request_id", requestID); err != nil {
		return err
	}
	if create == nil {
		return argErr("create", "nil")
	}
	return nil
}
