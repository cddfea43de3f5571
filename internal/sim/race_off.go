//go:build !race

package sim

// RaceEnabled reports whether the race detector is on: tests use it to run
// fewer schedules, since it slows the simulation down about tenfold.
const RaceEnabled = false
