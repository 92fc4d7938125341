package jsonstore

import "os"

// syncEvery is how many bytes a rewrite of a big file (jobs.json,
// runs.jsonl) writes between two syncs of it.
//
// On a file system that orders data before metadata (ext4's default), a
// sync of the journal or of runs.jsonl waits for the dirty data of every
// file written meanwhile: a rewrite of hundreds of megabytes synced only
// at its end holds up a Save for as long as the whole file takes to reach
// the disk. Synced as it goes, the rewrite leaves at most this much data
// for a Save's sync to wait for.
const syncEvery = 4 << 20

// syncingWriter writes to f and syncs it after every syncEvery bytes.
type syncingWriter struct {
	f       *os.File
	pending int
}

func (w *syncingWriter) Write(b []byte) (int, error) {
	n, err := w.f.Write(b)
	w.pending += n
	if err == nil && w.pending >= syncEvery {
		w.pending = 0
		err = w.f.Sync()
	}
	return n, err
}
