package linelease

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: Post
// and Follow return only once everything they started returned.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
