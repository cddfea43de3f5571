package shards

import (
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/relect/relect/internal/fakecalls"
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

// fakeCore implements Core: it counts the calls by verb
// (fakecalls.Counter) and keeps the log.
type fakeCore struct {
	fakecalls.Counter
	mu   sync.Mutex
	logs []string
}

func (c *fakeCore) NewRetry() Backoff { return &fixedBackoff{d: rp} }

func (c *fakeCore) Log(level slog.Level, msg string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.logs = append(c.logs, msg)
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
