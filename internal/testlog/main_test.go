package testlog_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: the goroutines a
// test starts to count are joined.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
