package fleetbench

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: every candidate of a
// fleet, and every watch of the fake it runs on, ends with the fleet.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
