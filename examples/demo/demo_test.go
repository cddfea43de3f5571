package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestScript runs the whole demo on the in-memory Lease API inside a
// synctest bubble, where its ~15 s of real time take milliseconds, and
// checks that every measurement is in range and no two candidates led at
// once.
func TestScript(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		t.Run(strings.Repeat("c", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := settings{
					candidates:    n,
					leaseDuration: 2 * time.Second,
					renewDeadline: 1500 * time.Millisecond,
					retryPeriod:   400 * time.Millisecond,
					statusEvery:   2 * time.Second,
					sampleEvery:   2 * time.Millisecond,
				}
				var out bytes.Buffer
				d := newDemo(s, newMemBackend(), newTimeline(&out), slog.New(slog.DiscardHandler))
				err := d.script(context.Background())
				if err != nil || !strings.Contains(out.String(), "result: PASS") {
					t.Fatalf("script: %v\n%s", err, out.String())
				}
				if got := strings.Count(out.String(), "OK\n"); got != 6 {
					t.Errorf("%d results OK, want 6 (3 measurements, each as it is made and in the summary)\n%s", got, out.String())
				}
			})
		})
	}
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-candidates", "1"}, "at least 2"},
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
