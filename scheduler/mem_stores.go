package scheduler

// NewMemStores returns in-memory [Stores] for a plane that lives in one
// process, without Redis: one instance (the enabled = false setting of
// cmd/dispatcher), or several Dispatchers in one process sharing these
// stores, as tests do. cfg supplies the storm windows and the attempts
// (Dispatch.MaxAttempts); zero fields mean their defaults. The inboxes hold
// at most [MemInboxMaxLen] entries.
func NewMemStores(cfg Config) (Stores, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return Stores{}, err
	}
	due := NewMemDue()
	jobs, err := NewMemJobs(MemJobsConfig{MaxAttempts: cfg.Dispatch.MaxAttempts, TTL: cfg.Dispatch.JobTTL, Due: due})
	if err != nil {
		return Stores{}, err
	}
	snaps := NewMemSnapshots()
	streams := NewMemStreams(MemInboxMaxLen, MemInboxMaxLen)
	const group = "scheduler"
	return Stores{
		Presence:     NewMemPresence(),
		Owners:       NewMemOwners(),
		Snapshots:    snaps,
		Sender:       streams,
		Inbox:        func(id string) Inbox { return streams.Inbox(id, group) },
		Jobs:         jobs,
		Due:          due,
		Reservations: NewMemReservations(MemReservationsConfig{}),
		Turns:        NewMemTurns(),
		Storm:        NewMemStorm(cfg.Storm),
	}, nil
}

// MemInboxMaxLen bounds each inbox and dead-letter queue of [NewMemStores].
const MemInboxMaxLen = 10000
