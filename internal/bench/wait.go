package bench

import "time"

// Await calls cond every poll until it returns true, and reports whether
// it did within limit (cond is called once more at the deadline). It
// blocks the caller meanwhile; inside a testing/synctest bubble it waits
// in simulated time.
func Await(limit, poll time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(poll)
	}
}
