// Package affinity holds the pure rules of turn affinity: which node a job
// of a turn goes to, when a turn's affinity is written, and which finalize
// reasons keep a turn going.
//
// A turn is one speaker's utterance, cut into consecutive jobs. Its jobs
// should run on one node, so the turn remembers the node of its first job
// (its affinity node, the field affinity_node_id of the turn's record) for
// as long as the turn lasts, and no longer: affinity never crosses turns
// and never covers a whole session.
//
// # Selection
//
// [Select] (select_node in the dispatch plane's vocabulary) picks the
// turn's affinity node when it is online and
// in the job's candidate pool, otherwise a node chosen among the pool's
// online nodes by a [Strategy], and nothing is written back. The
// default strategy is [Random] (its randomness is injectable for
// tests); [Rendezvous] is an opt-in alternative that hashes the turn id
// over the pool, so the choice is reproducible across instances and moves
// as few turns as possible when nodes come and go ([Weight]).
//
// # Writing
//
// [Record] is the write rule: the affinity is written once, right after
// the turn's first job is assigned and before any later job of the turn is
// selected; later jobs never overwrite it, even when the affinity node was
// offline and they went elsewhere.
//
// # Binding and clearing
//
// A job is finalized for a [Reason]. [ShouldBindJobToNode] is true for
// [MaxDuration] (the segment was cut for length, the turn goes on) and false
// for [Manual] and [Timeout], which end the turn: [EndsTurn] tells the caller
// to clear the turn's affinity, and the next utterance starts a new turn.
//
// The dispatch plane keeps the affinity in a store (scheduler.TurnStore;
// Redis: store/redisstore) and calls these rules around it.
package affinity
