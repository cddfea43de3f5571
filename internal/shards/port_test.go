package shards

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/relect/relect/internal/leasewatch"
)

// The fake port: what the component asks of the election core, played by
// the tests. Calls go straight to the Leases client (no bucket); the
// registry view, the counters and the registration renewals are recorded.

const (
	testNS    = "ns"
	testLease = "work"
	ld        = 15 * time.Second
	rp        = 2 * time.Second
)

// fakeCore implements Core: it counts the calls by verb and keeps the log.
type fakeCore struct {
	mu    sync.Mutex
	calls map[string]int
	logs  []string
}

func (c *fakeCore) Do(ctx context.Context, verb string, bounded bool, fn func(context.Context) error) error {
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[verb]++
	c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	return fn(ctx)
}

func (c *fakeCore) DoSpare(ctx context.Context, verb string, bounded bool, fn func(context.Context) error) error {
	return c.Do(ctx, verb, bounded, fn)
}

func (c *fakeCore) Ready(ctx context.Context) error { return ctx.Err() }

func (c *fakeCore) Decode(ev watch.Event, open bool) leasewatch.Event {
	return leasewatch.Decode(ev, open)
}

func (c *fakeCore) NewRetry() Backoff { return &fixedBackoff{d: rp} }

func (c *fakeCore) Log(level slog.Level, msg string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.logs = append(c.logs, msg)
}

func (c *fakeCore) count(verb string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[verb]
}

// fixedBackoff waits d every time.
type fixedBackoff struct{ d time.Duration }

func (b *fixedBackoff) Next() time.Duration { return b.d }
func (b *fixedBackoff) Reset()              {}

// fakeLeader implements Leader over a fixed registry view.
type fakeLeader struct {
	fakeCore
	regs     []Registration // the registry view; nil: not listed yet
	moved    int
	failing  int
	gaps     int
	failures int
	differ   int
}

var _ Leader = (*fakeLeader)(nil)

func (l *fakeLeader) Registrations(time.Time) ([]Registration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.regs), l.regs != nil
}

func (l *fakeLeader) RegistrationVersions(ids []string) map[string]string {
	if len(ids) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, id := range ids {
		out[id] = ""
	}
	return out
}

func (l *fakeLeader) Gap(time.Duration)   { l.with(func() { l.gaps++ }) }
func (l *fakeLeader) Moved(n int)         { l.with(func() { l.moved += n }) }
func (l *fakeLeader) Failed()             { l.with(func() { l.failures++ }) }
func (l *fakeLeader) SetFailing(n int)    { l.with(func() { l.failing = n }) }
func (l *fakeLeader) SetSetsDiffer(n int) { l.with(func() { l.differ = n }) }

func (l *fakeLeader) with(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f()
}

// fakeMember implements Member: it counts the registration's renewals.
type fakeMember struct {
	fakeCore
	renewals int
}

var _ Member = (*fakeMember)(nil)

func (m *fakeMember) RenewRegistration() { m.with(func() { m.renewals++ }) }

func (m *fakeMember) with(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f()
}

func (m *fakeMember) renewed() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.renewals
}

// testConfig is the Config of election testLease with shards, for
// candidate id.
func testConfig(id string, shards ...string) Config {
	return Config{Name: testLease, Namespace: testNS, Identity: id, Describe: testNS + "/" + testLease,
		Shards: shards, LeaseDuration: ld, RetryPeriod: rp, JoinDelay: ld, Cooldown: ld, MaxCooldown: time.Hour}
}
