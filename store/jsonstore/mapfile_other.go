//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd)

package jsonstore

import "os"

// mapFile returns the contents of the file at path, read into memory
// (where the standard library maps no file), and release, which does
// nothing here.
func mapFile(path string) ([]byte, func(), error) {
	data, err := os.ReadFile(path)
	return data, func() {}, err
}
