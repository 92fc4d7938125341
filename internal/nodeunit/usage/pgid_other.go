//go:build !unix

package usage

// pgid returns 0: process groups are not known on this system, so only
// descendants of the node-unit count.
func pgid(int) int { return 0 }
