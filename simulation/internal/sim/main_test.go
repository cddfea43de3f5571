package sim

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: every candidate of a
// schedule, the control loop's included, is joined when the schedule ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
