package sim

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// countingHandler counts the records it is asked to handle.
type countingHandler struct{ n *atomic.Int64 }

func (h countingHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (h countingHandler) Handle(context.Context, slog.Record) error { h.n.Add(1); return nil }
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h countingHandler) WithGroup(string) slog.Handler             { return h }

// What relect's candidates log goes into the History, each record with its
// candidate and simulated time, and into the Timeline a failing test
// prints; none reaches the process's default logger, so a passing run
// prints none of it.
func TestLogsStayInTheHistory(t *testing.T) {
	var leaked atomic.Int64
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(countingHandler{&leaked}))

	var logged *History
	for seed := uint64(0); seed < 20 && logged == nil; seed++ {
		synctest.Test(t, func(t *testing.T) {
			if h := Play(Generate(seed), Relect); len(h.Logs) > 0 {
				logged = h
			}
		})
	}
	if logged == nil {
		t.Fatal("no candidate logged a warning in 20 schedules, each with API faults")
	}
	timeline := logged.Timeline(false)
	for _, l := range logged.Logs {
		if l.Candidate < 0 || l.Candidate >= logged.Candidates || l.At < 0 || l.At > logged.End {
			t.Errorf("log %+v: candidate or time out of the run (%d candidates, end %v)", l, logged.Candidates, logged.End)
		}
		if !strings.HasPrefix(l.Text, "level=WARN") && !strings.HasPrefix(l.Text, "level=ERROR") {
			t.Errorf("log %q: want Warn and above only", l.Text)
		}
		if want := CandidateName(l.Candidate) + " log: " + l.Text; !strings.Contains(timeline, want) {
			t.Errorf("the timeline lacks %q", want)
		}
	}
	if n := leaked.Load(); n > 0 {
		t.Errorf("%d records reached slog.Default", n)
	}
}
