package relecttest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: every watch the
// fake serves (its pump) ends when the watch is stopped or its client's
// context ends, and every Elector the tests run is joined.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
