//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package jsonstore

import (
	"os"
	"syscall"
)

// mapFile returns the contents of the file at path mapped read-only into
// memory, and release, to be called once nothing points into them any
// more. A read into the heap copies the file and touches every page of
// the copy (at 380 MB, a third of a start went there), and the copy
// stays in the process until the collector frees it and the runtime
// gives it back; the mapped pages are the page cache's own, and leave
// the process at release. Where a file cannot be mapped (empty, too large
// for the address space), it is read.
//
// The file must not shrink while it is mapped (a read past its end would
// crash the process): the store writes its files anew and renames them,
// which leaves a mapping of the old file as it was.
func mapFile(path string) ([]byte, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if size := st.Size(); size > 0 && size == int64(int(size)) && st.Mode().IsRegular() {
		if data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_PRIVATE); err == nil {
			return data, func() { syscall.Munmap(data) }, nil
		}
	}
	data, err := os.ReadFile(path)
	return data, func() {}, err
}
