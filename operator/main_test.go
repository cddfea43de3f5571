package operator_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: every Elector and
// watch a test starts ends with it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
