package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// timeline prints lines stamped with the time since the demo started. It is
// safe for concurrent use; a block of lines is never interleaved with others.
type timeline struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func newTimeline(w io.Writer) *timeline { return &timeline{w: w, start: time.Now()} }

// since returns the time elapsed from the start to at.
func (t *timeline) since(at time.Time) time.Duration { return at.Sub(t.start) }

// printf prints one line: the time, who it is about, and the message.
func (t *timeline) printf(at time.Time, who, format string, args ...any) {
	t.block(at, who, []string{fmt.Sprintf(format, args...)})
}

// block prints lines as one unit, the first stamped, the others indented
// under it.
func (t *timeline) block(at time.Time, who string, lines []string) {
	var b strings.Builder
	for i, l := range lines {
		if i == 0 {
			fmt.Fprintf(&b, "%+8.3fs  %-7s %s\n", t.since(at).Seconds(), who, l)
		} else {
			fmt.Fprintf(&b, "%10s  %-7s %s\n", "", "", l)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	io.WriteString(t.w, b.String())
}

// heading prints a section title.
func (t *timeline) heading(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.w, "\n== "+format+"\n", args...)
}

// plain prints a line without a stamp.
func (t *timeline) plain(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.w, format+"\n", args...)
}

// seconds formats d as seconds with millisecond precision.
func seconds(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }
