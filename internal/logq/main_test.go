package logq

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: a
// Queue's stop returns only once its goroutine ended.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
