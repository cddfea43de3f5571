package work

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Unix(1767225600, 0) // as Beats.Last returns it: in Local

// fakePort is the core's side, recorded: a strict fake whose answers the
// test sets (someoneElse).
type fakePort struct {
	someoneElse   bool
	logs          []string
	streakEnded   int
	checkFailures int
	stuckSince    time.Time
}

func (p *fakePort) Log(_ slog.Level, msg string, _ ...any) { p.logs = append(p.logs, msg) }
func (p *fakePort) SomeoneElse(time.Time) bool             { return p.someoneElse }
func (p *fakePort) EndStreak()                             { p.streakEnded++ }
func (p *fakePort) CheckFailures(n int)                    { p.checkFailures = n }
func (p *fakePort) StuckSince(at time.Time)                { p.stuckSince = at }

// fakeLeader is one leading term's side, recorded.
type fakeLeader struct {
	stuck     []error
	recovered []time.Duration
	handedAt  time.Time
	handedFor error
}

func (l *fakeLeader) Number() int64                    { return 7 }
func (l *fakeLeader) SteppingDown() bool               { return !l.handedAt.IsZero() }
func (l *fakeLeader) Stuck(why error)                  { l.stuck = append(l.stuck, why) }
func (l *fakeLeader) Recovered(stuckFor time.Duration) { l.recovered = append(l.recovered, stuckFor) }
func (l *fakeLeader) HandOver(why error, now time.Time) {
	l.handedAt, l.handedFor = now, why
}

var (
	_ Port   = (*fakePort)(nil)
	_ Leader = (*fakeLeader)(nil)
)

func checkOpts() Options {
	return Options{Check: func(context.Context) error { return nil }, CheckInterval: 10 * time.Second, CheckTimeout: 5 * time.Second,
		CheckFailures: 3, Cooldown: time.Minute, MaxCooldown: 10 * time.Minute}
}

func TestDoubling(t *testing.T) {
	for k, want := range []time.Duration{0, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute} {
		assert.Equal(t, want, Doubling(time.Minute, 10*time.Minute, k), "k=%d", k)
	}
}

// TestCheckFailingNTimesIsStuck: CheckFailures failures in a row make a
// leader's work stuck, and it hands over at once (nobody to hold for);
// fewer do not.
func TestCheckFailingNTimesIsStuck(t *testing.T) {
	port, leader := &fakePort{someoneElse: true}, &fakeLeader{}
	l := New(checkOpts(), port)
	term := l.Start(leader, NewBeats(), t0, 0)
	down := errors.New("downstream down")
	for i := 1; i <= 2; i++ {
		l.Checked(down, term, t0.Add(time.Duration(i)*10*time.Second))
		assert.Empty(t, leader.stuck, "after %d failures", i)
		assert.False(t, l.Failing())
	}
	at := t0.Add(30 * time.Second)
	l.Checked(down, term, at)
	require.Len(t, leader.stuck, 1)
	assert.ErrorIs(t, leader.stuck[0], ErrStuck)
	assert.ErrorIs(t, leader.stuck[0], down)
	assert.True(t, l.Failing())
	assert.Equal(t, 3, port.checkFailures)
	assert.Equal(t, at, port.stuckSince)
	assert.Equal(t, at, leader.handedAt, "handed over as it was judged stuck")
	assert.ErrorIs(t, leader.handedFor, ErrStuck)
}

// TestCheckRecovers: a healthy call ends the failures in a row; a stuck
// term that must hold (and so leads on) reports its recovery.
func TestCheckRecovers(t *testing.T) {
	port, leader := &fakePort{someoneElse: false}, &fakeLeader{}
	l := New(checkOpts(), port)
	term := l.Start(leader, NewBeats(), t0, 0)
	for i := 1; i <= 3; i++ {
		l.Checked(errors.New("no"), term, t0.Add(time.Duration(i)*10*time.Second))
	}
	require.Len(t, leader.stuck, 1)
	assert.True(t, leader.handedAt.IsZero(), "nobody else known: it leads on")
	assert.Contains(t, port.logs, "relect: the leader's work is stuck, and no other candidate is known to take over: leading on")
	since, why := l.Stuck(term, t0.Add(40*time.Second))
	assert.Equal(t, t0.Add(30*time.Second), since)
	assert.ErrorContains(t, why, "the work check failed 3 times in a row: no")
	l.Checked(nil, term, t0.Add(45*time.Second))
	since, why = l.Stuck(term, t0.Add(46*time.Second))
	assert.True(t, since.IsZero())
	assert.NoError(t, why)
	assert.Equal(t, []time.Duration{15 * time.Second}, leader.recovered)
	assert.False(t, l.Failing())
	assert.Zero(t, port.checkFailures)
	assert.True(t, port.stuckSince.IsZero())
}

// TestTermCountsItsOwnFailures: a candidate whose check failed while it
// stood back, and which leads all the same, gets CheckFailures chances in
// its term.
func TestTermCountsItsOwnFailures(t *testing.T) {
	port, leader := &fakePort{someoneElse: true}, &fakeLeader{}
	l := New(checkOpts(), port)
	for i := 1; i <= 3; i++ {
		l.Checked(errors.New("no"), nil, t0.Add(time.Duration(i)*10*time.Second))
	}
	require.True(t, l.Failing(), "stands back in line")
	term := l.Start(leader, NewBeats(), t0.Add(35*time.Second), 0)
	l.Checked(errors.New("no"), term, t0.Add(40*time.Second))
	l.Checked(errors.New("no"), term, t0.Add(50*time.Second))
	assert.Empty(t, leader.stuck, "two failures of its own")
	l.Checked(errors.New("no"), term, t0.Add(60*time.Second))
	assert.Len(t, leader.stuck, 1)
}

// TestBeatsKeepItAlive: a term that beats within BeatWindow is not stuck,
// and Due names the next beat's deadline; one that stops beating is stuck
// BeatWindow after its last beat, and a beat then wakes its watchdog.
func TestBeatsKeepItAlive(t *testing.T) {
	port, leader := &fakePort{someoneElse: false}, &fakeLeader{}
	l := New(Options{BeatWindow: 10 * time.Second, Cooldown: time.Minute, MaxCooldown: time.Hour}, port)
	beats := NewBeats()
	term := l.Start(leader, beats, t0, 0)
	assert.Equal(t, t0.Add(10*time.Second), l.Due(term, t0))
	for at := t0.Add(9 * time.Second); at.Before(t0.Add(time.Minute)); at = at.Add(9 * time.Second) {
		beats.Beat(at)
		assert.Equal(t, at.Add(10*time.Second), l.Due(term, at.Add(time.Second)), "at %v", at.Sub(t0))
	}
	assert.Empty(t, leader.stuck)
	last := beats.Last()
	l.Due(term, last.Add(10*time.Second))
	require.Len(t, leader.stuck, 1)
	assert.ErrorContains(t, leader.stuck[0], "no beat for 10s (BeatWindow 10s)")
	since, why := l.Stuck(term, last.Add(11*time.Second))
	assert.Equal(t, last.Add(10*time.Second), since)
	assert.ErrorContains(t, why, "no beat for 11s", "as of now, not as judged")
	select {
	case <-beats.Woken():
		t.Fatal("woken before a beat")
	default:
	}
	beats.Beat(last.Add(12 * time.Second))
	<-beats.Woken() // a beat of stuck work wakes the watchdog
	l.Due(term, last.Add(12*time.Second))
	assert.Equal(t, []time.Duration{2 * time.Second}, leader.recovered)
}

// TestCooldownDoubles: a term that took over a streak of k stuck
// handovers holds for Cooldown × 2^(k−1), at most MaxCooldown, before it
// hands over for stuck work itself; it logs the hold once.
func TestCooldownDoubles(t *testing.T) {
	for k, hold := range map[int]time.Duration{1: time.Minute, 2: 2 * time.Minute, 3: 4 * time.Minute, 4: 8 * time.Minute, 5: 10 * time.Minute, 9: 10 * time.Minute} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			port, leader := &fakePort{someoneElse: true}, &fakeLeader{}
			l := New(Options{BeatWindow: 10 * time.Second, Cooldown: time.Minute, MaxCooldown: 10 * time.Minute}, port)
			term := l.Start(leader, NewBeats(), t0, k)
			streak, until := term.Hold()
			assert.Equal(t, k, streak)
			assert.Equal(t, t0.Add(hold), until)
			assert.Equal(t, t0.Add(10*time.Second), l.Due(term, t0))
			assert.Equal(t, t0.Add(hold), l.Due(term, t0.Add(10*time.Second)), "stuck: the next look is the hold's end")
			l.Due(term, t0.Add(hold-time.Second))
			assert.True(t, leader.handedAt.IsZero(), "holds")
			assert.Len(t, port.logs, 1, "the hold is logged once")
			l.Due(term, t0.Add(hold))
			assert.Equal(t, t0.Add(hold), leader.handedAt)
			assert.Zero(t, port.streakEnded)
		})
	}
}

// TestStreakEnds: a term whose work stays healthy ends the fleet's streak
// once it held its hold and had twice the time it takes to be judged stuck
// — not before.
func TestStreakEnds(t *testing.T) {
	port, leader := &fakePort{someoneElse: true}, &fakeLeader{}
	o := checkOpts() // judged stuck in 3 × 10 s + 5 s = 35 s; twice: 70 s > the hold of 1 min
	l := New(o, port)
	term := l.Start(leader, NewBeats(), t0, 1)
	assert.Equal(t, t0.Add(70*time.Second), l.Due(term, t0), "twice the time to judge, after the hold's end")
	l.Due(term, t0.Add(69*time.Second))
	assert.Zero(t, port.streakEnded)
	l.Due(term, t0.Add(70*time.Second))
	assert.Equal(t, 1, port.streakEnded)
	streak, _ := term.Hold()
	assert.Zero(t, streak)
	assert.Empty(t, leader.stuck)

	// Judged in 10 s, twice 20 s: the streak ends with the hold, at 1 min.
	port, beats := &fakePort{someoneElse: true}, NewBeats()
	l = New(Options{BeatWindow: 10 * time.Second, Cooldown: time.Minute, MaxCooldown: time.Hour}, port)
	term = l.Start(leader, beats, t0, 1)
	for at := t0.Add(5 * time.Second); at.Before(t0.Add(time.Minute)); at = at.Add(5 * time.Second) {
		beats.Beat(at)
		l.Due(term, at)
	}
	assert.Zero(t, port.streakEnded)
	beats.Beat(t0.Add(time.Minute))
	l.Due(term, t0.Add(time.Minute))
	assert.Equal(t, 1, port.streakEnded)
}

// TestHealthyShardNotStopped: each shard's Elector has work liveness of
// its own; one whose check fails hands over, another that beats — on the
// same clock, the same options — is never stopped.
func TestHealthyShardNotStopped(t *testing.T) {
	o := checkOpts()
	o.BeatWindow = 10 * time.Second
	failing, healthy := &fakeLeader{}, &fakeLeader{}
	lf, lh := New(o, &fakePort{someoneElse: true}), New(o, &fakePort{someoneElse: true})
	bf, bh := NewBeats(), NewBeats()
	tf, th := lf.Start(failing, bf, t0, 0), lh.Start(healthy, bh, t0, 0)
	for i := 1; i <= 6; i++ {
		now := t0.Add(time.Duration(i) * 5 * time.Second)
		bf.Beat(now)
		bh.Beat(now)
		if i%2 == 0 {
			lf.Checked(errors.New("no"), tf, now)
			lh.Checked(nil, th, now)
		}
		lf.Due(tf, now)
		lh.Due(th, now)
	}
	assert.Equal(t, t0.Add(30*time.Second), failing.handedAt)
	assert.True(t, healthy.handedAt.IsZero())
	assert.Empty(t, healthy.stuck)
}

// fakeChecker records RunChecks' reports.
type fakeChecker struct {
	mu      sync.Mutex
	wanted  bool
	results []error
}

func (c *fakeChecker) Wanted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wanted
}

func (c *fakeChecker) got() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.results...)
}

func (c *fakeChecker) Checked(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.results = append(c.results, err)
}

// TestRunChecks: the check runs every CheckInterval while wanted; a call
// that hangs is a failure at its timeout and at every interval it still
// runs; RunChecks returns once ctx is done and the last call returned.
func TestRunChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var calls atomic.Int32
		o := checkOpts()
		o.Check = func(ctx context.Context) error {
			if calls.Add(1) == 2 {
				<-release // ignores its context
			}
			return nil
		}
		c := &fakeChecker{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { RunChecks(ctx, o, c); close(done) }()
		time.Sleep(25 * time.Second)
		assert.Zero(t, calls.Load(), "not wanted: not called")
		c.mu.Lock()
		c.wanted = true
		c.mu.Unlock()
		time.Sleep(10 * time.Second) // 30 s: the first call, healthy
		synctest.Wait()
		require.Equal(t, []error{nil}, c.got())
		time.Sleep(30 * time.Second) // 40 s: the second hangs; 45 s its timeout; 50 s, 60 s still running
		synctest.Wait()
		results := c.got()
		require.Len(t, results, 4)
		assert.ErrorContains(t, results[1], "did not return within 5s")
		assert.ErrorContains(t, results[2], "has not returned after 10s")
		assert.ErrorContains(t, results[3], "has not returned after 10s")
		assert.EqualValues(t, 2, calls.Load())
		cancel()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("returned while a call runs")
		default:
		}
		close(release)
		<-done
	})
}
