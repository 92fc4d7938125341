//go:build !unix

package main

import "os"

// lockFile does nothing where flock is missing: give each node-unit its
// own NODE_UNIT_ADDRESS or NODE_UNIT_DATA there.
func lockFile(*os.File) error { return nil }
