package redisstore

import "time"

// Results reported to an [OpHook].
const (
	ResultOK    = "ok"    // the operation succeeded
	ResultMiss  = "miss"  // it succeeded and found nothing (a Redis nil)
	ResultError = "error" // it failed
)

// OpHook, when set, is called after each Redis operation an adapter makes
// with the operation's name (such as "fsm_apply" or "reserve"), its result
// ([ResultOK], [ResultMiss] or [ResultError]) and how long it took. It is the
// source of the scheduler_phase2_redis_op_total{op,result} counter; it must
// be fast and safe for concurrent use.
type OpHook func(op, result string, d time.Duration)

func (h OpHook) observe(op string, start time.Time, err error) {
	if h == nil {
		return
	}
	r := ResultOK
	if err != nil {
		r = ResultError
		if isNil(err) {
			r = ResultMiss
		}
	}
	h(op, r, time.Since(start))
}
