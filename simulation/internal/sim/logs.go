package sim

import (
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Log is one record a candidate's relect logged (Warn and above, as
// relect logs without Options.Logger), kept in the run's History instead of
// printed, so that a passing run prints nothing: Timeline shows them, beside
// the calls and events, for the run a test reports failing.
type Log struct {
	Candidate int
	At        time.Duration
	Text      string // level, message and attributes, as slog's TextHandler writes them
}

// runLogs collects one run's Log records. It has its own lock, not
// runner.mu: relect may log from a call the runner makes under runner.mu.
type runLogs struct {
	mu   sync.Mutex // guards logs
	logs []Log
}

// logger returns the Options.Logger of candidate c in run r.
func (r *runner) logger(c int) *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{r: r, candidate: c}, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{} // Log.At says when, in the run's time
			}
			return a
		},
	}))
}

// logWriter receives one record per Write from slog's TextHandler.
type logWriter struct {
	r         *runner
	candidate int
}

func (w logWriter) Write(p []byte) (int, error) {
	l := Log{Candidate: w.candidate, At: w.r.now(), Text: strings.TrimSuffix(string(p), "\n")}
	w.r.logs.mu.Lock()
	w.r.logs.logs = append(w.r.logs.logs, l)
	w.r.logs.mu.Unlock()
	return len(p), nil
}

// take returns the records collected so far; called once every candidate
// has returned.
func (l *runLogs) take() []Log {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.logs
}
