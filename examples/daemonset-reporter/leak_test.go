package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: the
// reporter and its Elector end with the test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
