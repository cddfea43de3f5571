package faultproxy

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: every
// proxy's listener and copying goroutines end when it is closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
