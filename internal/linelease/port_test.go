package linelease

import (
	"context"
	"sync"
	"time"

	"github.com/relect/relect/internal/fakecalls"
	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The fake port: what the component asks of the election core, played by
// the tests. Calls go straight to relecttest's Lease API (no bucket), each
// counted by verb; the state's side is a Want under a mutex, as the core
// keeps it, and what the component reports is recorded.

const (
	testNS    = "ns"
	testLease = "work"
	ld        = 15 * time.Second
	rp        = 2 * time.Second
	refresh   = 5 * time.Minute
)

// testConfig is the Config of identity's candidate, on api.
func testConfig(api *relecttest.LeaseAPI, identity string) Config {
	return Config{
		Name: testLease, Namespace: testNS, Identity: identity,
		LeaseDuration: ld, RetryPeriod: rp, Refresh: refresh,
		Leases: api.Client(identity).Clientset().CoordinationV1().Leases(testNS),
	}
}

// fakeCalls implements Calls: it counts the calls by verb.
type fakeCalls = fakecalls.Counter

var _ Calls = (*fakeCalls)(nil)

// fixedBackoff waits d every time.
type fixedBackoff struct{ d time.Duration }

func (b fixedBackoff) Next() time.Duration { return b.d }
func (b fixedBackoff) Reset()              {}

// fakeLeader implements Leader: the state's Want under its mutex, for the
// leader's record of term, and what Post reported.
type fakeLeader struct {
	fakeCalls
	mu        sync.Mutex
	want      Want
	term      int32  // the term of the leader's last write
	version   string // Version's answer
	posted    []wire.Line
	rvs       []string
	forbidden error
}

var _ Leader = (*fakeLeader)(nil)

func (l *fakeLeader) NewRetry() Backoff { return fixedBackoff{rp} }

func (l *fakeLeader) Wanted() (wire.Line, bool, bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.want.Current(true, l.term)
}

func (l *fakeLeader) Version() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.version
}

func (l *fakeLeader) Posted(line wire.Line, rv string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.want.Wrote(line)
	l.posted, l.rvs = append(l.posted, line), append(l.rvs, rv)
}

func (l *fakeLeader) Forbidden(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forbidden = err
}

// set makes the leader want sc posted for its record of term (sc's
// Posted set), withView as given.
func (l *fakeLeader) set(term int32, sc *wire.Succession, withView bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.term = term
	l.want.Set(wire.Line{Holder: sc.From, Term: term, Succession: sc}, withView)
}

// writes returns the lines Post reported written (the zero Line of its
// end included), and their resourceVersions.
func (l *fakeLeader) writes() ([]wire.Line, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]wire.Line(nil), l.posted...), append([]string(nil), l.rvs...)
}

// refused returns what Forbidden reported (nil: nothing).
func (l *fakeLeader) refused() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.forbidden
}

// fakeOutsider implements Outsider: the election's Lease is read by the
// candidate's own client; the lines observed, the beats and the reads are
// recorded.
type fakeOutsider struct {
	fakeCalls
	cfg      Config
	mu       sync.Mutex
	observed []wire.Line
	beats    int
	reads    int
}

var _ Outsider = (*fakeOutsider)(nil)

func (o *fakeOutsider) ReadLease(ctx context.Context) (*coordinationv1.Lease, error) {
	o.mu.Lock()
	o.reads++
	o.mu.Unlock()
	return o.cfg.Leases.Get(ctx, testLease, metav1.GetOptions{})
}

// RecordKey is the record's holder and renewTime: enough for the tests.
func (o *fakeOutsider) RecordKey(l *coordinationv1.Lease) string {
	return wire.Holder(l) + "@" + l.Spec.RenewTime.String()
}

func (o *fakeOutsider) Observed(line wire.Line) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.observed = append(o.observed, line)
}

func (o *fakeOutsider) WardenBeat() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.beats++
}

func (o *fakeOutsider) seen() (lines []wire.Line, beats, reads int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]wire.Line(nil), o.observed...), o.beats, o.reads
}

// line returns a posted line of term, by leader "a", naming next as
// successors, keeper "k" and warden.
func line(term int32, warden string, next ...string) *wire.Succession {
	sc := &wire.Succession{Term: term, From: "a", Posted: true, Keepers: []string{"k"}, Warden: warden}
	for _, n := range next {
		sc.Next = append(sc.Next, wire.Successor{Identity: n})
	}
	return sc
}

// putLine writes the line Lease as a leader would, posting sc for term
// (nil: withdrawn), living twice the refresh.
func putLine(api *relecttest.LeaseAPI, term int32, sc *wire.Succession) {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: wire.LineName(testLease)}}
	if old := api.Lease(testNS, l.Name); old != nil {
		l = old
	}
	wire.SetLine(l, testLease, wire.Line{Holder: "a", Term: term, Succession: sc, Seconds: int32(2 * refresh / time.Second)}, time.Now())
	api.Put(l)
}
