//go:build !race

// Package race tells tests whether the race detector is on.
package race

// Enabled reports whether the race detector is on: tests use it to run
// fewer or smaller cases, since it slows them down about tenfold.
const Enabled = false
