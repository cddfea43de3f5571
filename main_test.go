package relect_test

import (
	"log/slog"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: every
// goroutine Run starts must be joined before Run returns.
// Candidates with no Logger warn to slog.Default(): to nowhere here, but
// in TestNoLoggerWarnsToTheDefaultLogger.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	goleak.VerifyTestMain(m)
}
