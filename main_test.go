package relect_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: every
// goroutine Run starts must be joined before Run returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
