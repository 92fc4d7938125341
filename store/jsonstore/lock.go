package jsonstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// LockFile is the file of the data directory that a [Store] keeps locked
// while it is open (see "Locking" in the package documentation). It is
// created empty and never removed: only the lock on it counts.
const LockFile = "jobs.lock"

// ErrLocked is returned, wrapped with the data directory, by [New] when the
// lock on the directory's [LockFile] is held: by another process, or by
// another open [Store] of this process. Nothing in the directory has been
// read or changed. Test for it with errors.Is.
var ErrLocked = errors.New("jsonstore: data directory is in use by another process")

// lockPatience is how long lockDir tries again a lock held elsewhere.
const lockPatience = 200 * time.Millisecond

// errWouldBlock is what lockFile returns when the lock is held elsewhere.
var errWouldBlock = errors.New("lock held elsewhere")

// lockDir opens (creating it 0600 when missing) and locks dir/jobs.lock,
// and returns the open file that holds the lock: closing it releases the
// lock. A lock held elsewhere is tried again for up to lockPatience: a
// store closed in this process while another goroutine starts a process
// stays locked until that process runs its program, as the new process
// holds a copy of the lock's descriptor until then. Opening the file
// changes nothing in it, so a failed attempt leaves the directory as it
// was.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("jsonstore: open lock file %s: %w", path, err)
	}
	err = lockFile(f)
	for deadline := time.Now().Add(lockPatience); errors.Is(err, errWouldBlock) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		err = lockFile(f)
	}
	if err != nil {
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, fmt.Errorf("%w: %s (%s is locked; stop the other process or use another directory)", ErrLocked, dir, LockFile)
		}
		return nil, fmt.Errorf("jsonstore: lock %s: %w", path, err)
	}
	return f, nil
}
