package shardplan

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests:
// nothing here starts one, and nothing must.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
