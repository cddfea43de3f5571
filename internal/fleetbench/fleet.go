package fleetbench

import (
	"context"
	"fmt"
	"time"

	"github.com/relect/relect/internal/bench"
	"github.com/relect/relect/internal/defaults"
	leasewire "github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"
	"k8s.io/client-go/kubernetes"
)

// The Lease every candidate campaigns for.
const (
	namespace = "default"
	leaseName = "fleet"
)

// The durations every candidate uses: relect's defaults, which the client-go
// loop is given too.
const (
	ld = defaults.LeaseDuration
	rd = defaults.RenewDeadline
	rp = defaults.RetryPeriod
)

// poll is how often the fleet looks for a new term or a renewal, in
// simulated time.
const poll = 10 * time.Millisecond

// Scenario is how the leader goes, and whether the apiserver sheds the
// acquiring writes that follow.
type Scenario struct {
	// Crash: the leader's process dies without a word (no release, no
	// deregistration); else it stops gracefully and releases.
	Crash bool
	// Shed: the apiserver answers the burst of acquiring writes with 429
	// (see Config.ShedWindow).
	Shed bool
}

// Scenarios lists the scenarios, in report order.
var Scenarios = []Scenario{{}, {Crash: true}, {Shed: true}, {Crash: true, Shed: true}}

func (s Scenario) String() string {
	name := "graceful"
	if s.Crash {
		name = "crash"
	}
	if s.Shed {
		name += ", 429"
	}
	return name
}

// Config is one fleet's run.
type Config struct {
	Impl bench.Impl
	// N is the number of candidates, at least 2.
	N int
	// Changes is how many changes of leader each scenario measures; zero
	// means 5.
	Changes int
	// Scenarios are played in this order, Changes each; nil means
	// Scenarios.
	Scenarios []Scenario
	// RoundTrip is the time every Lease call takes; zero means 1 ms.
	RoundTrip time.Duration
	// ShedWindow is how long the apiserver sheds acquiring writes once the
	// first of a change has arrived; zero means 10 ms.
	ShedWindow time.Duration
}

func (c Config) withDefaults() Config {
	if c.Changes == 0 {
		c.Changes = 5
	}
	if c.Scenarios == nil {
		c.Scenarios = Scenarios
	}
	if c.RoundTrip == 0 {
		c.RoundTrip = time.Millisecond
	}
	if c.ShedWindow == 0 {
		c.ShedWindow = 10 * time.Millisecond
	}
	return c
}

// Result is what one fleet's run measured.
type Result struct {
	Impl bench.Impl
	N    int
	// Steady is the fleet's calls per second with nobody changing: every
	// call of one LeaseDuration after the fleet formed, divided by it.
	Steady float64
	// Watches are the watches open on the election's Lease at the end of
	// that LeaseDuration, and LineWatches those on relect's line Lease
	// (docs/design.md, "Only the line watches").
	Watches, LineWatches int
	// Changes are the changes of leader measured, in order.
	Changes []*Change
	// Simulated is the simulated time the run took.
	Simulated time.Duration
}

// Run forms a fleet of cfg.N candidates of cfg.Impl on one in-memory Lease
// and measures cfg.Changes changes of leader in each scenario. It must be
// called inside a testing/synctest bubble, where it runs in simulated time;
// it returns once every candidate has stopped. It fails if a change brings
// no new leader within three LeaseDurations.
func Run(cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	if cfg.N < 2 {
		return nil, fmt.Errorf("fleetbench: N = %d: someone has to take over", cfg.N)
	}
	f := newFleet(cfg)
	begin := time.Now()
	defer f.stopAll()
	if err := f.form(); err != nil {
		return nil, err
	}
	res := &Result{Impl: cfg.Impl, N: cfg.N, Steady: f.steady()}
	res.Watches, res.LineWatches = f.api.Watchers(namespace, leaseName), f.api.Watchers(namespace, leasewire.LineName(leaseName))
	for _, sc := range cfg.Scenarios {
		for range cfg.Changes {
			ch, err := f.change(sc)
			if err != nil {
				return nil, fmt.Errorf("fleetbench: %v, N = %d, %v: %w", cfg.Impl, cfg.N, sc, err)
			}
			res.Changes = append(res.Changes, ch)
		}
	}
	f.stopAll()
	res.Simulated = time.Since(begin)
	return res, f.check()
}

// check compares the wire's log with the Lease API's own counts: every call
// the wire let through must have reached the API, and no other.
func (f *fleet) check() error {
	api := 0
	for _, c := range f.cands {
		api += c.client.TotalCalls()
	}
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	through := 0
	for _, c := range f.w.calls {
		if !c.Shed {
			through++
		}
	}
	if through != api {
		return fmt.Errorf("fleetbench: the wire let %d calls through, the Lease API counted %d", through, api)
	}
	return nil
}

// fleet is one run's candidates on one LeaseAPI, behind one wire.
type fleet struct {
	cfg   Config
	api   *relecttest.LeaseAPI
	w     *wire
	cands []*candidate

	terms bench.Terms[string] // every term's start, by identity
}

// candidate is one candidate: a process at a time, which can be stopped,
// killed and started again with the same identity, as a pod would.
type candidate struct {
	f      *fleet
	name   string
	client *relecttest.Client
	cs     kubernetes.Interface
	cancel context.CancelFunc
	done   chan struct{}
}

func newFleet(cfg Config) *fleet {
	api := relecttest.NewLeaseAPI()
	f := &fleet{cfg: cfg, api: api, w: newWire(api, cfg.RoundTrip, cfg.ShedWindow)}
	f.terms.Poll = poll
	for i := range cfg.N {
		name := fmt.Sprintf("c%04d", i)
		client := api.Client(name)
		client.SetLatency(cfg.RoundTrip)
		f.cands = append(f.cands, &candidate{f: f, name: name, client: client, cs: f.w.clientset(name, client)})
	}
	return f
}

func (f *fleet) started(identity string) { f.terms.Started(identity, time.Now()) }

// start runs a new process of c.
func (c *candidate) start() {
	c.f.w.revive(c.name)
	p := newProcess(c.f.cfg.Impl, c.name, c.cs, c.f.started)
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan struct{})
	go func() {
		defer close(c.done)
		p.run(ctx)
	}()
}

// stop cancels c's process (which releases the lease if it holds it, and
// is alive) and waits for it to return.
func (c *candidate) stop() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	<-c.done
	c.cancel = nil
}

func (f *fleet) stopAll() {
	for _, c := range f.cands {
		c.stop()
	}
}

func (f *fleet) byName(name string) *candidate {
	for _, c := range f.cands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// form starts the first candidate on a released Lease, waits until it
// leads, starts the others, and lets the fleet settle for two
// LeaseDurations: every relect candidate has registered, and the leader
// has published its line of succession.
func (f *fleet) form() error {
	f.api.PutReleased(namespace, leaseName)
	f.cands[0].start()
	if _, err := f.terms.Next(time.Time{}, "", ld); err != nil {
		return fmt.Errorf("fleetbench: the first candidate: %w", err)
	}
	for _, c := range f.cands[1:] {
		c.start()
	}
	time.Sleep(2 * ld)
	return nil
}

// steady returns the fleet's calls per second over one LeaseDuration.
func (f *fleet) steady() float64 {
	from := f.w.count()
	time.Sleep(ld)
	return float64(f.w.count()-from) / ld.Seconds()
}

// awaitRenewal waits, up to limit, for holder's first renewal sent at or
// after from, and returns it.
func (f *fleet) awaitRenewal(holder string, from time.Time, limit time.Duration) (Call, error) {
	var renewal Call
	if !bench.Await(limit, poll, func() bool {
		for _, c := range f.w.log(from) {
			if c.Candidate == holder && c.renewal() {
				renewal = c
				return true
			}
		}
		return false
	}) {
		return Call{}, fmt.Errorf("%s did not renew within %v", holder, limit)
	}
	return renewal, nil
}

// change makes the leader go as sc says (bench.Change, through a scene),
// measures the change of leader that follows, starts the old leader again
// as a new process, and lets the fleet settle for a LeaseDuration.
func (f *fleet) change(sc Scenario) (*Change, error) {
	cur, _ := f.terms.Latest()
	defer f.w.disarm()
	start, next, err := bench.Change(scene{f, sc}, cur, rp)
	if err != nil {
		return nil, err
	}
	ch := &Change{Impl: f.cfg.Impl, N: f.cfg.N, Scenario: sc, From: cur.Who, To: next.Who, Start: start, Term: next.At}
	closing, err := f.awaitRenewal(next.Who, next.At.Add(rp/2), 2*rp)
	if err != nil {
		return nil, err
	}
	ch.End = closing.Start
	for _, c := range f.w.log(ch.Start) {
		if !c.Start.After(ch.End) {
			ch.Calls = append(ch.Calls, c)
		}
	}
	f.byName(cur.Who).start()
	time.Sleep(ld)
	return ch, nil
}

// scene is the fleet playing one scenario: the bench.Fleet that
// bench.Change drives.
type scene struct {
	*fleet
	sc Scenario
}

// Renewal waits up to two RetryPeriods for holder's renewal.
func (s scene) Renewal(holder string, from time.Time) (time.Time, error) {
	c, err := s.awaitRenewal(holder, from, 2*rp)
	return c.End, err
}

// Leave arms the shedding if the scenario sheds (change disarms it), and
// stops the leader's process: a crash kills it, and the change starts when
// the lease expires, LeaseDuration after its followers saw the last
// renewal (when the apiserver answered it, at the earliest); else its Run
// is cancelled, and the change starts then.
func (s scene) Leave(leader string) (time.Time, error) {
	old := s.byName(leader)
	if s.sc.Shed {
		s.w.arm()
	}
	if s.sc.Crash {
		s.w.kill(old.name)
		old.stop()
		return s.w.lastRenewal(old.name).End.Add(ld), nil
	}
	start := time.Now()
	old.stop()
	return start, nil
}

// Next waits up to three LeaseDurations for the next term.
func (s scene) Next(from time.Time, not string) (bench.Mark[string], error) {
	return s.terms.Next(from, not, 3*ld)
}
