// Package testlog is the slog.Handler relect's tests log to: it keeps the
// records it is given, at or above a level, and can block each one, as a
// logger writing to a stalled pipe would. One handler for the tests that
// read what relect logged, instead of one per test file.
package testlog

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
)

// Handler is a slog.Handler that keeps a clone of every record at or
// above Level. The zero value keeps Info and above and never blocks. A
// Handler is safe for concurrent use; it must not be copied after first
// use (use a *Handler).
type Handler struct {
	// Level is the least level kept (Enabled): zero is Info, as slog's.
	Level slog.Level
	// Wait, if not nil, is called at the start of every Handle, before
	// the record is kept and outside the Handler's lock: it blocks the
	// caller as long as it likes (a sleep, a channel to close).
	Wait func()

	mu   sync.Mutex // guards recs
	recs []slog.Record
}

// All, as a Handler's Level, keeps every record: client-go's V(n) lines
// reach slog at level −n, below Debug from V(5) on.
const All = slog.Level(math.MinInt)

var _ slog.Handler = (*Handler)(nil)

// Enabled reports whether l is at or above h.Level.
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.Level }

// Handle calls h.Wait, if set, then keeps a clone of r.
func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	if h.Wait != nil {
		h.Wait()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

// WithAttrs returns h: the attributes of a Logger's With are not kept,
// only those of each record.
func (h *Handler) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup returns h: groups are not kept.
func (h *Handler) WithGroup(string) slog.Handler { return h }

// Records returns the records kept so far, oldest first.
func (h *Handler) Records() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]slog.Record(nil), h.recs...)
}

// Messages returns the messages of the records kept so far, oldest first.
func (h *Handler) Messages() []string {
	var out []string
	for _, r := range h.Records() {
		out = append(out, r.Message)
	}
	return out
}

// Lines returns the records kept so far, oldest first, each as one line:
// its level, its message and its attributes as key=value, separated by
// spaces ("WARN relect: degraded lease=default/job").
func (h *Handler) Lines() []string {
	var out []string
	for _, r := range h.Records() {
		var b strings.Builder
		b.WriteString(r.Level.String() + " " + r.Message)
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
			return true
		})
		out = append(out, b.String())
	}
	return out
}

// Naming returns the Lines that contain every one of words.
func (h *Handler) Naming(words ...string) []string {
	var out []string
next:
	for _, l := range h.Lines() {
		for _, w := range words {
			if !strings.Contains(l, w) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}
