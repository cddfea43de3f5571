package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs a helper mode when the test binary is started as one (see
// helperProcess), and otherwise the tests, failing if any goroutine
// outlives them.
func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperProcess(mode))
	}
	goleak.VerifyTestMain(m)
}
