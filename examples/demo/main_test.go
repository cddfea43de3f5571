package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: every
// candidate of the demo, and its fake's watches, end with the demo.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
