package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/internal/sim"
)

// The changes of leader the script makes, each measured and costed.
var changes = []string{"crash", "graceful stop", "yield", "handover", "hand edit"}

// script runs the whole demo with n candidates on the in-memory Lease API
// inside a synctest bubble, where its ~25 s of real time take
// milliseconds, and returns its output. It fails the test unless the
// script passed: every measurement in range, never two leaders at once.
func script(t *testing.T, n int) string {
	t.Helper()
	var out bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		s := settings{
			candidates:    n,
			leaseDuration: 2 * time.Second,
			renewDeadline: 1500 * time.Millisecond,
			retryPeriod:   400 * time.Millisecond,
			statusEvery:   2 * time.Second,
			sampleEvery:   2 * time.Millisecond,
		}
		d := newDemo(s, newMemBackend(), newTimeline(&out), slog.New(slog.DiscardHandler))
		if err := d.script(context.Background()); err != nil || !strings.Contains(out.String(), "result: PASS") {
			t.Fatalf("script: %v\n%s", err, out.String())
		}
	})
	return out.String()
}

// TestScript checks the output every run prints: each measurement OK, as
// it is made and in the summary; each change's calls, as it is made and in
// the summary.
func TestScript(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		t.Run(strings.Repeat("c", n), func(t *testing.T) {
			out := script(t, n)
			if got, want := strings.Count(out, "OK\n"), 2*(len(changes)); got != want {
				t.Errorf("%d results OK, want %d (%d measurements, each as it is made and in the summary)\n%s", got, want, len(changes), out)
			}
			checkCosts(t, out)
		})
	}
}

// checkCosts checks that the calls of every change are printed as they
// are counted and in the summary.
func checkCosts(t *testing.T, out string) {
	t.Helper()
	_, summary, ok := strings.Cut(out, "calls per change, by all")
	if !ok {
		t.Fatalf("no calls per change in the summary\n%s", out)
	}
	for _, c := range changes {
		if !strings.Contains(out, "CALLS   "+c+": ") || !strings.Contains(summary, "  "+c+":") {
			t.Errorf("the calls of the %s are not printed both as counted and in the summary\n%s", c, out)
		}
	}
}

// With -candidates 1000 the script runs as with three, and its output
// stays readable: the timeline shows terms and errors, not a thousand
// followers' view of each new leader, and the status block the candidates
// that lead, are in line or are down, and sums up the others. (Under the
// race detector, which makes a thousand candidates take a minute, 50.)
func TestScriptFleet(t *testing.T) {
	n := 1000
	if sim.RaceEnabled {
		n = 50
	}
	out := script(t, n)
	if got, want := strings.Count(out, "OK\n"), 2*len(changes); got != want {
		t.Errorf("%d results OK, want %d\n%s", got, want, out)
	}
	checkCosts(t, out)
	if strings.Contains(out, "sees a new holder") {
		t.Errorf("the timeline shows each follower's new leader")
	}
	if lines := strings.Count(out, "\n"); lines > 400 {
		t.Errorf("%d lines of output for %d candidates, want at most 400", lines, n)
	}
	if !strings.Contains(out, "followers: ") || !strings.Contains(out, fmt.Sprintf("stopped: %d ", n)) {
		t.Errorf("the status block does not sum up the followers, and at the end the stopped candidates\n%s", out)
	}
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-candidates", "1"}, "at least 2"},
		{[]string{"-candidates", "many"}, "invalid value"},
		{[]string{"-lease-duration", "1500ms"}, "LeaseDuration"},
		{[]string{"-renew-deadline", "3s"}, "RenewDeadline"},
		{[]string{"-in-cluster", "-kubeconfig", "x"}, "not both"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("run(%q) = %d, stderr %q; want 2 and a message containing %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
