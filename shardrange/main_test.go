package shardrange_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: a
// filtered watch's goroutine returns once the watch is stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
