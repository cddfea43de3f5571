package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/relect/relect/internal/bench"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relect/relect/e2e/internal/faultproxy"
	"github.com/relect/relect/e2e/internal/history"
	"k8s.io/client-go/rest"
)

// Candidate modes (the candidate's -mode flag).
const (
	modeRelect   = "relect"
	modeClientGo = "clientgo"
)

// candOpts configure one candidate process.
type candOpts struct {
	mode      string       // modeRelect (default) or modeClientGo
	lease     string       // Lease name (required)
	user      *rest.Config // credentials; nil: system:masters
	keepLease bool         // -keep-lease-on-cancel
	// direct: straight to the apiserver, without a fault proxy (a proxy
	// is a hop through the test process, which the benchmark's
	// in-process candidates keep busy).
	direct bool
	args   []string // more flags
}

// candidate is one candidate process, reached through its own fault proxy
// (unless candOpts.direct).
type candidate struct {
	*process
	mode  string
	proxy *faultproxy.Proxy // nil if direct
	hist  string            // history file
	log   string            // stderr
}

// startCandidate starts a candidate named id and waits until it has written
// its first record. The test's cleanup kills it if it is still running.
func (c *cluster) startCandidate(t *testing.T, id string, o candOpts) *candidate {
	t.Helper()
	bin := candidateBinary(t)
	if o.mode == "" {
		o.mode = modeRelect
	}
	dir, err := os.MkdirTemp(testDir(t), id+"-")
	if err != nil {
		t.Fatal(err)
	}
	cand := &candidate{
		mode: o.mode,
		hist: filepath.Join(dir, "history.jsonl"),
		log:  filepath.Join(dir, "stderr.log"),
	}
	addr := c.apiAddr()
	if !o.direct {
		cand.proxy = c.newProxy(t, id)
		addr = cand.proxy.Addr()
	}
	user := o.user
	if user == nil {
		user = c.adminConfig()
	}
	kc := filepath.Join(dir, "kubeconfig")
	kubeconfig(t, kc, user, addr)
	args := []string{
		"-kubeconfig", kc,
		"-namespace", namespace,
		"-name", o.lease,
		"-identity", id,
		"-mode", o.mode,
		"-history", cand.hist,
		"-lease-duration", leaseDuration.String(),
		"-renew-deadline", renewDeadline.String(),
		"-retry-period", retryPeriod.String(),
	}
	if o.keepLease {
		args = append(args, "-keep-lease-on-cancel")
	}
	args = append(args, o.args...)
	cand.process = startProcess(t, id, exec.Command(bin, args...), cand.log, cand.dump)
	waitFor(t, 10*time.Second, id+" to start", func() bool {
		for _, r := range cand.records() {
			if r.Kind == history.KindStart {
				return true
			}
		}
		return cand.exited()
	})
	if cand.exited() {
		t.Fatalf("%s exited at start: %v", id, cand.err())
	}
	return cand
}

// records reads the history written so far.
func (cand *candidate) records() []history.Record {
	recs, err := history.ReadFile(cand.hist)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		cand.t.Errorf("%s: %v", cand.id, err)
	}
	return recs
}

// view is the leadership view the checker trusts for this candidate:
// relect's IsLeader, or client-go's OnStartedLeading context.
func (cand *candidate) view() string {
	if cand.mode == modeClientGo {
		return history.ViewCtx
	}
	return history.ViewRelect
}

// leading reports whether the candidate's history says it leads now.
func (cand *candidate) leading() bool {
	if cand.exited() {
		return false
	}
	on := false
	for _, r := range cand.records() {
		if r.View == cand.view() {
			switch r.Kind {
			case history.KindOn:
				on = true
			case history.KindOff:
				on = false
			}
		}
	}
	return on
}

// intervals returns its leader intervals in its trusted view.
func (cand *candidate) intervals() []history.Interval {
	return history.Intervals(cand.id, cand.records(), cand.view(), cand.dead())
}

// firstOnAfter is the start and term of its first leader interval that
// began after from, or zero.
func (cand *candidate) firstOnAfter(from time.Time) (time.Time, int64) {
	iv, _ := cand.firstAfter(from)
	return iv.Start, iv.Term
}

// firstAfter is its first leader interval that began after from.
func (cand *candidate) firstAfter(from time.Time) (history.Interval, bool) {
	for _, iv := range cand.intervals() {
		if iv.Start.After(from) {
			return iv, true
		}
	}
	return history.Interval{}, false
}

// takenOverOnlyAfter checks, as far as the samples prove
// (history.Interval.OnlyAfter), that cand's first term after from began no
// sooner than earliest; what is the scenario, for the message.
func (cand *candidate) takenOverOnlyAfter(t *testing.T, what string, from, earliest time.Time) {
	t.Helper()
	iv, ok := cand.firstAfter(from)
	if ok && !iv.OnlyAfter(earliest) {
		t.Errorf("%s: %s led %v after %s, before the lease allowed (%v): %v", what, cand.id,
			iv.SurelyFrom.Sub(from), from.Format("15:04:05.000"), earliest.Sub(from), iv)
	}
}

// events returns its relect events (or client-go callbacks) named kind at or
// after from.
func (cand *candidate) events(kind string, from time.Time) []history.Record {
	var out []history.Record
	for _, r := range cand.records() {
		if r.Kind == history.KindEvent && r.Event == kind && !r.Time().Before(from) {
			out = append(out, r)
		}
	}
	return out
}

// eventsAfterOne waits until cand has recorded at least one event kind at
// or after from, and returns all of them. The candidate writes an event
// after the Lease call it reports has returned, so the apiserver (and any
// other candidate) can show the effect before the record is written:
// read right away, the count races with that write.
func (cand *candidate) eventsAfterOne(t *testing.T, kind string, from time.Time) []history.Record {
	t.Helper()
	var rs []history.Record
	waitFor(t, slack, cand.id+"'s "+kind+" event", func() bool {
		rs = cand.events(kind, from)
		return len(rs) > 0
	})
	return rs
}

// Leadership controls of a relect candidate process, and the events it
// records for them.
const (
	sigYield    = syscall.SIGUSR1 // Elector.Yield: event "yield"
	sigHandOver = syscall.SIGUSR2 // Elector.HandOver(-handover-to): event "handover"
)

// control sends sig (sigYield or sigHandOver) to a relect candidate, waits
// for the record of the call it made, and checks that the call returned
// no error. It returns the record: T is when the call was made.
func (cand *candidate) control(sig syscall.Signal) history.Record {
	cand.t.Helper()
	event := "yield"
	if sig == sigHandOver {
		event = "handover"
	}
	sent := cand.signal(sig)
	var rec history.Record
	waitFor(cand.t, renewDeadline+slack, cand.id+"'s "+event, func() bool {
		if rs := cand.events(event, sent); len(rs) > 0 {
			rec = rs[0]
			return true
		}
		return false
	})
	if rec.Err != "" {
		cand.t.Fatalf("%s: %s returned %s", cand.id, event, rec.Err)
	}
	return rec
}

// terminate sends SIGTERM, waits for a graceful exit and checks it exited
// 0 with an exit record.
func (cand *candidate) terminate() (sent, exited time.Time) {
	cand.t.Helper()
	sent = cand.signal(syscall.SIGTERM)
	select {
	case <-cand.waited:
	case <-time.After(renewDeadline + 10*time.Second):
		cand.t.Fatalf("%s did not exit within %v of SIGTERM", cand.id, renewDeadline+10*time.Second)
	}
	if err := cand.err(); err != nil {
		cand.t.Errorf("%s: exit after SIGTERM: %v (want status 0)", cand.id, err)
	}
	recs := cand.records()
	if len(recs) == 0 || recs[len(recs)-1].Kind != history.KindExit {
		cand.t.Errorf("%s: history does not end with an exit record", cand.id)
		return sent, cand.dead()
	}
	exit := recs[len(recs)-1]
	if cand.mode == modeRelect {
		cand.t.Logf("%s exited %s after SIGTERM; Lease calls %v, token-bucket wait %s, events dropped %d",
			cand.id, ms(cand.dead().Sub(sent)), exit.Calls, ms(time.Duration(exit.BucketWait)), exit.Dropped)
	} else {
		cand.t.Logf("%s exited %s after SIGTERM", cand.id, ms(cand.dead().Sub(sent)))
	}
	return sent, cand.dead()
}

// dump logs the tail of its history and stderr, for a failed test.
func (cand *candidate) dump() {
	for _, f := range []string{cand.hist, cand.log} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
		if len(lines) > 60 {
			lines = lines[len(lines)-60:]
		}
		cand.t.Logf("---- %s: last %d lines of %s:\n%s", cand.id, len(lines), filepath.Base(f), bytes.Join(lines, []byte("\n")))
	}
}

// livenessGrace is how much longer than expected a wait may take before
// the test fails: what we expect is a measurement, which a loaded machine
// can exceed (a process scheduled late, the apiserver slow), and is
// reported; what has not happened 30 s later on a machine that can run the
// suite at all will not happen — a liveness failure.
const livenessGrace = 30 * time.Second

// waitFor polls cond every 10 ms until it holds, and returns when. It
// reports a wait that took longer than expected, and fails the test if
// cond does not hold within expected + livenessGrace.
func waitFor(t *testing.T, expected time.Duration, what string, cond func() bool) time.Time {
	t.Helper()
	start := time.Now()
	if !bench.Await(expected+livenessGrace, 10*time.Millisecond, cond) {
		t.Fatalf("%s did not happen within %v (expected within %v)", what, expected+livenessGrace, expected)
	}
	now := time.Now()
	if took := now.Sub(start); took > expected {
		t.Logf("slow: %s took %s, expected within %v (a measurement on this machine, not a failure)", what, ms(took), expected)
	}
	return now
}

// waitLeader waits until exactly one of cands leads, and returns it.
func waitLeader(t *testing.T, timeout time.Duration, cands ...*candidate) *candidate {
	t.Helper()
	var leader *candidate
	waitFor(t, timeout, "a leader among "+names(cands), func() bool {
		leader = nil
		n := 0
		for _, c := range cands {
			if c.leading() {
				leader = c
				n++
			}
		}
		return n == 1
	})
	return leader
}

// waitNewLeader waits until exactly one of cands leads in an interval that
// began after from, and returns it with that interval's start and term.
func waitNewLeader(t *testing.T, timeout time.Duration, from time.Time, cands ...*candidate) (*candidate, time.Time, int64) {
	t.Helper()
	var leader *candidate
	var on time.Time
	var term int64
	waitFor(t, timeout, "a new leader among "+names(cands), func() bool {
		leader = nil
		n := 0
		for _, c := range cands {
			if c.leading() {
				n++
				if s, tm := c.firstOnAfter(from); !s.IsZero() {
					leader, on, term = c, s, tm
				}
			}
		}
		return n == 1 && leader != nil
	})
	return leader, on, term
}

// others returns cands without c.
func others(c *candidate, cands ...*candidate) []*candidate {
	var out []*candidate
	for _, x := range cands {
		if x != c {
			out = append(out, x)
		}
	}
	return out
}

func names(cands []*candidate) string {
	var s []string
	for _, c := range cands {
		s = append(s, c.id)
	}
	return strings.Join(s, ", ")
}

// checkSafety runs the checker over the histories of cands: no two
// candidates' leader intervals share an instant; every overlap is an error.
// It logs and returns all intervals.
func checkSafety(t *testing.T, cands ...*candidate) []history.Interval {
	t.Helper()
	var all []history.Interval
	for _, c := range cands {
		all = append(all, c.intervals()...)
	}
	var lines []string
	for _, iv := range all {
		lines = append(lines, "  "+iv.String())
	}
	t.Logf("leader intervals:\n%s", strings.Join(lines, "\n"))
	for _, o := range history.Overlaps(all) {
		t.Errorf("SAFETY VIOLATION: %v", o)
	}
	return all
}

// checkTerms checks the term numbers of the relect intervals that started
// in [from, until) (history.TermRegressions); a zero until means no end.
func checkTerms(t *testing.T, ivs []history.Interval, from, until time.Time) {
	t.Helper()
	var after []history.Interval
	for _, iv := range ivs {
		if !iv.Start.Before(from) && (until.IsZero() || iv.Start.Before(until)) {
			after = append(after, iv)
		}
	}
	for _, v := range history.TermRegressions(after) {
		t.Errorf("TERM NUMBERS: %s", v)
	}
}

// checkFences checks the fences of the relect intervals in ivs
// (history.FenceRegressions): each term's is above every earlier term's,
// whatever happened to the Lease in between. It logs each relect term's,
// and fails if none of them has one, which would make the check vacuous.
func checkFences(t *testing.T, ivs []history.Interval) {
	t.Helper()
	var known, unknown int
	for _, iv := range ivs {
		if iv.View != history.ViewRelect {
			continue
		}
		if iv.Fence == "" {
			unknown++
		} else {
			known++
		}
	}
	t.Logf("fences: %d relect terms with a fence, %d without (a term that ended as it was sampled)", known, unknown)
	if known == 0 && unknown > 0 {
		t.Errorf("FENCING: no relect term recorded a fence")
	}
	for _, v := range history.FenceRegressions(ivs) {
		t.Errorf("FENCING: %s", v)
	}
}

// ms formats a duration for the log.
func ms(d time.Duration) string { return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond)) }
