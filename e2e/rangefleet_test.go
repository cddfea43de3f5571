package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/relect/relect/e2e/internal/faultproxy"
	"github.com/relect/relect/e2e/internal/history"
	"github.com/relect/relect/internal/bench"
)

var (
	rangeInformerOnce sync.Once
	rangeInformerBin  string
	rangeInformerErr  error
)

// rangeInformerBinary builds e2e/cmd/rangeinformer once per run. Never with
// the race detector: ten of them and the apiserver share two cores, and
// what they measure (the bytes and objects an informer receives, when a
// range is held) is the library's behaviour, not a race.
func rangeInformerBinary(t *testing.T) string {
	t.Helper()
	rangeInformerOnce.Do(func() {
		rangeInformerBin, rangeInformerErr = build(t, ".", "rangeinformer", "./cmd/rangeinformer", false)
	})
	if rangeInformerErr != nil {
		t.Fatal(rangeInformerErr)
	}
	return rangeInformerBin
}

// rangeProc is one rangeinformer process: its identity is its own, as a
// Deployment's pod name is (a replacement is a new identity in the same
// slot).
type rangeProc struct {
	*process
	id      string
	slot    int
	hist    string
	stopped time.Time // when the test sent SIGTERM (zero: never)
	// proxy is its own way to the apiserver (the fleet is proxied), or
	// nil: it uses the fleet's kubeconfig, straight to the apiserver.
	proxy *faultproxy.Proxy
	// cut and healed bound its partition (zero: never cut off).
	cut, healed time.Time
}

// cutOffAt reports whether p was cut off from the apiserver at t.
func (p *rangeProc) cutOffAt(t time.Time) bool {
	return !p.cut.IsZero() && !t.Before(p.cut) && (p.healed.IsZero() || !t.After(p.healed))
}

// records reads the history written so far.
func (p *rangeProc) records() []history.Record {
	recs, err := history.ReadFile(p.hist)
	if err != nil && !os.IsNotExist(err) {
		p.t.Errorf("%s: %v", p.id, err)
	}
	return recs
}

// rangeFleet is TestShardRangeMeasure's fleet of rangeinformer processes,
// relect candidates or static holders (static), on one control plane.
type rangeFleet struct {
	t      *testing.T
	c      *cluster
	static bool
	lease  string // the election's Lease (relect)
	kc     string // the kubeconfig every process uses, straight to the apiserver (unless proxied)
	// proxied: each process reaches the apiserver through a faultproxy of
	// its own (rangeProc.proxy), so that one can be cut off (partition).
	proxied bool
	size    rangeSize
	lt      leaseTiming  // the relect processes' durations
	warm    bool         // relect with warm takers (rangeinformer -warm)
	procs   []*rangeProc // every process started, in order
}

// newRangeFleet returns an empty fleet; name tells its files and Lease
// apart from the other fleets of the test; lt are the relect processes'
// durations.
func newRangeFleet(t *testing.T, c *cluster, name string, size rangeSize, static bool, lt leaseTiming) *rangeFleet {
	t.Helper()
	f := &rangeFleet{t: t, c: c, static: static, lease: leaseName(t) + "-" + name, size: size, lt: lt,
		kc: filepath.Join(testDir(t), name+".kubeconfig")}
	kubeconfig(t, f.kc, c.adminConfig(), c.apiAddr())
	return f
}

// start starts a process in slot (the static scheme's range slot of
// size.procs).
func (f *rangeFleet) start(slot int) *rangeProc {
	f.t.Helper()
	gen := 1
	for _, p := range f.procs {
		if p.slot == slot {
			gen++
		}
	}
	kind := "r"
	if f.static {
		kind = "s"
	}
	id := fmt.Sprintf("%s%02d-%d", kind, slot, gen)
	dir := filepath.Join(testDir(f.t), filepath.Base(f.lease), id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	p := &rangeProc{id: id, slot: slot, hist: filepath.Join(dir, "history.jsonl")}
	kc := f.kc
	if f.proxied {
		p.proxy = f.c.newProxy(f.t, filepath.Base(f.lease)+"-"+id)
		kc = filepath.Join(dir, "kubeconfig")
		kubeconfig(f.t, kc, f.c.adminConfig(), p.proxy.Addr())
	}
	args := []string{"-kubeconfig", kc, "-namespace", namespace, "-identity", id, "-history", p.hist,
		"-label", rangeLabel, "-lease-duration", f.lt.ld.String(),
		"-renew-deadline", f.lt.rd.String(), "-retry-period", f.lt.rp.String()}
	if f.static {
		args = append(args, "-static", fmt.Sprintf("%d/%d", slot, f.size.procs))
	} else {
		args = append(args, "-name", f.lease, "-shards", strconv.Itoa(f.size.shards))
	}
	if f.warm {
		args = append(args, "-warm")
	}
	p.process = startProcess(f.t, id, exec.Command(rangeInformerBinary(f.t), args...), filepath.Join(dir, "stderr.log"), nil)
	f.procs = append(f.procs, p)
	return p
}

// live returns the running processes, by slot.
func (f *rangeFleet) live() []*rangeProc {
	var out []*rangeProc
	for _, p := range f.procs {
		if !p.exited() {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *rangeProc) int { return a.slot - b.slot })
	return out
}

// await polls cond every 100 ms (the fleet's histories are read each
// time) and fails the test if it does not hold within expected +
// livenessGrace; it returns when it held.
func (f *rangeFleet) await(expected time.Duration, what string, cond func() bool) time.Time {
	f.t.Helper()
	start := time.Now()
	if !bench.Await(expected+livenessGrace, 100*time.Millisecond, cond) {
		f.t.Fatalf("%s did not happen within %v", what, expected+livenessGrace)
	}
	if took := time.Since(start); took > expected {
		f.t.Logf("slow: %s took %s, expected within %v (a measurement on this machine, not a failure)", what, ms(took), expected)
	}
	return time.Now()
}

// holdings returns every range held by any process of the fleet so far.
func (f *rangeFleet) holdings() []holding {
	var out []holding
	for _, p := range f.procs {
		out = append(out, holdingsOf(f.t, p.id, p.records(), p.dead())...)
	}
	return out
}

// openBy returns the open holdings (held now, by running processes but
// the one named except) by process, and whether every one of them has
// synced.
func (f *rangeFleet) openBy(except string) (map[string][]holding, bool) {
	by := map[string][]holding{}
	synced := true
	for _, p := range f.live() {
		if p.id == except {
			continue
		}
		by[p.id] = nil
		for _, h := range holdingsOf(f.t, p.id, p.records(), time.Time{}) {
			if h.iv.Open {
				by[p.id] = append(by[p.id], h)
				synced = synced && !h.synced.IsZero()
			}
		}
	}
	return by, synced
}

// settled reports whether every range is held by exactly one running
// process, each holder synced; for relect also that the running
// processes each hold ⌊S/n⌋ or ⌈S/n⌉ shards.
func (f *rangeFleet) settled() bool { return f.settledWithout("") }

// settledWithout is settled over the running processes but the one named
// except (a process cut off from the apiserver, which holds nothing).
func (f *rangeFleet) settledWithout(except string) bool {
	by, synced := f.openBy(except)
	if !synced {
		return false
	}
	want := f.size.shards
	if f.static {
		want = len(by)
	}
	held := map[string]bool{}
	n := len(by)
	for _, hs := range by {
		if !f.static && (len(hs) < want/n || len(hs) > (want+n-1)/n) {
			return false
		}
		for _, h := range hs {
			if held[h.iv.Shard] {
				return false
			}
			held[h.iv.Shard] = true
		}
	}
	return len(held) == want
}

// synced reports whether p holds a range whose informer has synced.
func (f *rangeFleet) synced(p *rangeProc) bool {
	for _, h := range holdingsOf(f.t, p.id, p.records(), time.Time{}) {
		if h.iv.Open && !h.synced.IsZero() {
			return true
		}
	}
	return false
}

// leader is the identity the election's Lease names now.
func (f *rangeFleet) leader() string {
	l := f.c.getLease(f.t, f.lease)
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// victim returns the election's leader if leader, else the running
// follower holding the most ranges.
func (f *rangeFleet) victim(leader bool) *rangeProc {
	f.t.Helper()
	id := f.leader()
	by, _ := f.openBy("")
	var best *rangeProc
	for _, p := range f.live() {
		if (p.id == id) == leader && (best == nil || len(by[p.id]) > len(by[best.id])) {
			best = p
		}
	}
	if best == nil {
		f.t.Fatalf("no running process is the leader (%q) = %v", id, leader)
	}
	return best
}

// stop sends SIGTERM to p and waits for it to exit.
func (f *rangeFleet) stop(p *rangeProc) {
	f.t.Helper()
	p.stopped = p.signal(syscall.SIGTERM)
	select {
	case <-p.waited:
	case <-time.After(f.lt.rd + livenessGrace):
		f.t.Fatalf("%s did not exit within %v of SIGTERM", p.id, f.lt.rd+livenessGrace)
	}
	if err := p.err(); err != nil {
		f.t.Errorf("%s: exit after SIGTERM: %v (want status 0)", p.id, err)
	}
}

// settleTime is how long a relect fleet may take to settle after a
// change: a first deployment creates the election's Lease and the shards'
// after LeaseDuration each, and a joining process is given shards after
// JoinDelay (LeaseDuration); an expiry takes LeaseDuration; every range's
// informer lists once more. Static processes only list.
func (f *rangeFleet) settleTime() time.Duration {
	if f.static {
		return 5 * time.Second
	}
	return 3*f.lt.ld + 4*f.lt.rp + 5*time.Second
}

// rollingRestart replaces every running process, one at a time, in slot
// order, waiting until the fleet is settled after each: with surge, as a
// Deployment with maxSurge 1, maxUnavailable 0 (the new process starts,
// the fleet settles with it, then the old one stops); without, as one
// with maxSurge 0, maxUnavailable 1 (the old one stops, then the new one
// starts). It returns the window it ran in.
func (f *rangeFleet) rollingRestart(surge bool) (from, to time.Time) {
	f.t.Helper()
	from = time.Now()
	for _, old := range f.live() {
		if surge {
			p := f.start(old.slot)
			ready := f.settled // a relect fleet of one more
			if f.static {
				ready = func() bool { return f.synced(p) }
			}
			f.await(f.settleTime(), old.id+"'s surge ready", ready)
			f.stop(old)
		} else {
			f.stop(old)
			f.start(old.slot)
		}
		f.await(f.settleTime(), "the fleet settled after "+old.id+"'s restart", f.settled)
	}
	return from, time.Now()
}
