package deploy_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives the tests (the
// monitoring checks run an Elector).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
