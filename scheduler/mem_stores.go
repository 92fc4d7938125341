package scheduler

// NewMemStores returns in-memory [Stores] for a plane that lives in one
// process, without Redis: one instance (the enabled = false setting of
// cmd/dispatcher), or several Dispatchers in one process sharing these
// stores, as tests do. cfg supplies the inbox bounds (stream_maxlen,
// dlq_maxlen), the storm windows and the attempts (dispatcher
// max_attempts); zero fields mean their defaults.
func NewMemStores(cfg Config) (Stores, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return Stores{}, err
	}
	jobs, err := NewMemJobs(MemJobsConfig{MaxAttempts: cfg.Dispatch.MaxAttempts})
	if err != nil {
		return Stores{}, err
	}
	snaps := NewMemSnapshots()
	streams := NewMemStreams(int(cfg.StreamMaxLen), int(cfg.DLQMaxLen))
	group := cfg.StreamGroup
	return Stores{
		Presence:     NewMemPresence(),
		Owners:       NewMemOwners(),
		Snapshots:    snaps,
		Sender:       streams,
		Inbox:        func(id string) Inbox { return streams.Inbox(id, group) },
		Jobs:         jobs,
		Book:         NewMemBook(),
		Due:          NewMemDue(),
		Reservations: NewMemReservations(MemReservationsConfig{}),
		Turns:        NewMemTurns(snaps.Online),
		Storm:        NewMemStorm(cfg.Storm.Windows()),
	}, nil
}
