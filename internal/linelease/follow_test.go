package linelease

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// following is a Follow in progress.
type following struct {
	done   chan struct{}
	exit   Exit
	err    error
	cancel context.CancelFunc
}

// follow reads the line Lease as identity's outsider and follows it;
// the test fails if the line Lease is missing.
func follow(t *testing.T, api *relecttest.LeaseAPI, identity string) (*following, *fakeOutsider) {
	t.Helper()
	cfg := testConfig(api, identity)
	o := &fakeOutsider{cfg: cfg}
	l, _, err := Read(t.Context(), cfg, o)
	require.NoError(t, err)
	require.NotNil(t, l)
	ctx, cancel := context.WithCancel(context.Background())
	f := &following{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(f.done)
		f.exit, f.err = Follow(ctx, cfg, o, l, nil, time.Time{})
	}()
	return f, o
}

// ended reports whether Follow returned.
func (f *following) ended() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// putRecord writes the election's Lease: held by holder in term, renewed
// now, publishing sc.
func putRecord(api *relecttest.LeaseAPI, holder string, term int32, sc *wire.Succession) {
	l := record(holder, term, sc, false)
	now, seconds := metav1.NewMicroTime(time.Now()), int32(ld/time.Second)
	l.Spec.RenewTime, l.Spec.AcquireTime, l.Spec.LeaseDurationSeconds = &now, &now, &seconds
	if old := api.Lease(testNS, testLease); old != nil {
		l.ResourceVersion = old.ResourceVersion
	}
	api.Put(l)
}

// An outsider follows the line Lease, reporting each line it posts, until
// the line names it, is withdrawn or deleted: it then watches the
// election's Lease again (the zero Exit), and its watch is closed.
func TestFollowUntilTheLineSendsItBack(t *testing.T) {
	for _, c := range []struct {
		name string
		end  func(api *relecttest.LeaseAPI)
	}{
		{"named", func(api *relecttest.LeaseAPI) { putLine(api, 5, line(5, "w", "o")) }},
		{"withdrawn", func(api *relecttest.LeaseAPI) { putLine(api, 5, nil) }},
		{"deleted", func(api *relecttest.LeaseAPI) { require.NoError(t, api.Delete(testNS, wire.LineName(testLease))) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := relecttest.NewLeaseAPI()
				first := line(4, "w", "b")
				putLine(api, 4, first)
				f, o := follow(t, api, "o")
				synctest.Wait()
				assert.Equal(t, 1, api.Watchers(testNS, wire.LineName(testLease)))
				next := line(4, "w", "c")
				putLine(api, 4, next)
				synctest.Wait()
				require.False(t, f.ended(), "a line that does not name it: it follows on")
				lines, _, _ := o.seen()
				require.Len(t, lines, 2)
				assert.True(t, Same(lines[0], wire.Line{Holder: "a", Term: 4, Succession: first}))
				assert.True(t, Same(lines[1], wire.Line{Holder: "a", Term: 4, Succession: next}))

				c.end(api)
				synctest.Wait()
				require.True(t, f.ended())
				require.NoError(t, f.err)
				assert.Equal(t, Exit{}, f.exit)
				assert.Zero(t, api.Watchers(testNS, wire.LineName(testLease)), "its watch is closed")
				_, _, reads := o.seen()
				assert.Zero(t, reads, "not the warden: no read of the election's Lease")
				assert.Equal(t, 1, o.Count(VerbGet))
				assert.Equal(t, 1, o.Count(VerbWatch))
			})
		})
	}
}

// A line not written for twice the refresh is stale: the leader may be
// gone with its whole line. The outsider comes back then, spread by up to
// a tenth of the refresh; a write of the line starts that over.
func TestFollowComesBackFromAStaleLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		putLine(api, 4, line(4, "w", "b"))
		f, _ := follow(t, api, "o")
		time.Sleep(refresh)
		putLine(api, 4, line(4, "w", "b")) // a refresh
		start := time.Now()
		<-f.done
		took := time.Since(start)
		t.Logf("stale %v after the last write (refresh %v)", took, refresh)
		assert.GreaterOrEqual(t, took, 2*refresh)
		assert.LessOrEqual(t, took, 2*refresh+refresh/10)
		assert.Equal(t, Exit{Stale: true}, f.exit)
	})
}

// Follow returns ctx's error when ctx is done.
func TestFollowEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		putLine(api, 4, line(4, "w", "b"))
		f, _ := follow(t, api, "o")
		synctest.Wait()
		f.cancel()
		<-f.done
		assert.ErrorIs(t, f.err, context.Canceled)
	})
}

// Named the line's warden, the outsider reads the election's Lease every
// two retry periods and beats: while the leader renews it follows on; a
// record unchanged between two reads brings it back, its observation
// counted from the first read that found the record.
func TestFollowAsTheWarden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		sc := line(4, "o", "b")
		putRecord(api, "a", 4, sc)
		putLine(api, 4, sc)
		f, o := follow(t, api, "o")
		synctest.Wait()
		_, beats, reads := o.seen()
		assert.Equal(t, 1, reads, "a warden named reads at once")
		assert.Equal(t, 1, beats, "and beats")
		for range 5 { // the leader renews every retry period
			time.Sleep(rp)
			putRecord(api, "a", 4, sc)
		}
		synctest.Wait()
		require.False(t, f.ended(), "the leader renews")
		lastRenewal := time.Now()
		time.Sleep(rp) // the next read finds the last renewal
		firstRead := time.Now()
		<-f.done
		t.Logf("back %v after the last renewal", time.Since(lastRenewal))
		require.NoError(t, f.err)
		require.NotNil(t, f.exit.Silent)
		assert.Equal(t, "a", wire.Holder(f.exit.Silent))
		assert.Equal(t, firstRead, f.exit.Since, "from the first read that found the record")
		assert.Equal(t, firstRead.Add(2*rp), time.Now(), "the second read found it unchanged")
		assert.False(t, f.exit.Stale)
		_, beats, reads = o.seen()
		assert.Equal(t, 5, reads, "every two retry periods")
		assert.Equal(t, 2, beats, "at the first read a lease duration after the last beat")
	})
}

// A watch that may not resume from the line Lease's own version (410 Gone:
// unchanged for longer than the apiserver's watch cache keeps) resumes
// from a list of it alone.
func TestFollowResumesFromAList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		putLine(api, 4, line(4, "w", "b"))
		cfg := testConfig(api, "o")
		o := &fakeOutsider{cfg: cfg}
		l, _, err := Read(t.Context(), cfg, o)
		require.NoError(t, err)
		other := func(i int) {
			api.Put(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: fmt.Sprint("other-", i)}})
		}
		other(0) // a change after the line Lease's, which the watch cache forgets
		time.Sleep(2 * time.Minute)
		for i := range 120 { // the apiserver's watch cache keeps 100 changes at least
			other(i + 1)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = Follow(ctx, cfg, o, l, nil, time.Time{})
		}()
		synctest.Wait()
		assert.Equal(t, 1, api.Watchers(testNS, wire.LineName(testLease)), "watching, from the list's version")
		assert.Equal(t, 2, o.Count(VerbGet), "the read, and one list")
		assert.Equal(t, 2, o.Count(VerbWatch), "refused (410), then from the list")
		next := line(4, "w", "c")
		putLine(api, 4, next)
		synctest.Wait()
		lines, _, _ := o.seen()
		assert.True(t, Same(lines[len(lines)-1], wire.Line{Holder: "a", Term: 4, Succession: next}))
		cancel()
		<-done
	})
}

// A follower that watched a record posting no line withdraws the line
// Lease if it posts a line of that record's term or an earlier one; a
// line of a later term, a withdrawn line or a missing line Lease are left
// alone.
func TestWithdraw(t *testing.T) {
	for _, c := range []struct {
		name      string
		lineTerm  int32 // 0: no line Lease
		withdrawn bool
		record    *coordinationv1.Lease
		writes    int
	}{
		{"a plain client-go holder", 4, false, record("plain", 5, nil, false), 1},
		{"a hand edit in the line's term", 4, false, record("plain", 4, nil, false), 1},
		// A missing record has no term: every line posted is a later
		// term's (the line stays until a leader posts, or it goes stale).
		{"a missing record", 4, false, nil, 0},
		{"posted by a later term", 6, false, record("plain", 5, nil, false), 0},
		{"withdrawn already", 4, true, record("plain", 5, nil, false), 0},
		{"no line Lease", 0, false, record("plain", 5, nil, false), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			api := relecttest.NewLeaseAPI()
			if c.lineTerm > 0 {
				sc := line(c.lineTerm, "w", "b")
				if c.withdrawn {
					sc = nil
				}
				putLine(api, c.lineTerm, sc)
			}
			before := api.Lease(testNS, wire.LineName(testLease))
			calls := &fakeCalls{}
			Withdraw(t.Context(), testConfig(api, "o"), calls, c.record)
			assert.Equal(t, 1, calls.Count(VerbGet))
			assert.Equal(t, c.writes, calls.Count(VerbPost))
			after := api.Lease(testNS, wire.LineName(testLease))
			if c.writes == 0 {
				assert.Equal(t, before, after, "left alone")
				return
			}
			got := wire.LineOf(after)
			assert.True(t, got.Withdrawn())
			if c.record != nil {
				assert.Equal(t, wire.Holder(c.record), got.Holder)
				assert.Equal(t, wire.Transitions(c.record), got.Term)
			}
			assert.Equal(t, int32(2*refresh/time.Second), got.Seconds, "its lifetime kept")
		})
	}
}
