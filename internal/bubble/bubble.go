// Package bubble counts the goroutines of a testing/synctest bubble, for
// tests that assert how many goroutines the code under test runs.
// runtime.NumGoroutine counts the whole process: a goroutine of another
// test, of the testing package or of a library's init, starting or ending
// meanwhile, changes it (TestIdleFollowerGoroutines once read -1 own
// goroutines).
package bubble

import (
	"bytes"
	"regexp"
	"runtime"
)

// header matches a goroutine's header in runtime.Stack's dump, capturing
// its bubble's id: "goroutine 7 [chan receive (durable), synctest bubble
// 1]:" (Go 1.25 and later print the bubble of a goroutine in one; with
// GODEBUG=tracebacklabels=1 its labels follow).
var header = regexp.MustCompile(`(?m)^goroutine \d+ \[.*, synctest bubble (\d+)\b`)

// Goroutines returns how many goroutines belong to the caller's synctest
// bubble, or 0 when the caller is not in one. The count includes the
// caller and synctest's own (3 in a bubble of synctest.Test that started
// nothing): compare counts, do not read one alone. It
// stops the world to take a dump of every goroutine's stack (as
// runtime.Stack does), so call it from tests only. Safe for concurrent
// use.
func Goroutines() int {
	own := header.FindSubmatch(stack(false))
	if own == nil {
		return 0
	}
	n := 0
	for _, m := range header.FindAllSubmatch(stack(true), -1) {
		if bytes.Equal(m[1], own[1]) {
			n++
		}
	}
	return n
}

// stack returns runtime.Stack's dump, of every goroutine if all.
func stack(all bool) []byte {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, all)
		if n < len(buf) {
			return buf[:n]
		}
		buf = make([]byte, 2*len(buf))
	}
}
