package linelease

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// post runs Post for leader until the returned function cancels it and
// waits for it to return.
func post(cfg Config, leader *fakeLeader) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Post(ctx, cfg, leader)
	}()
	return func() { cancel(); <-done }
}

// posted returns the line the line Lease posts, and its renewTime; the
// test fails if there is none.
func posted(t *testing.T, api *relecttest.LeaseAPI) (wire.Line, time.Time) {
	t.Helper()
	l := api.Lease(testNS, wire.LineName(testLease))
	require.NotNil(t, l, "the line Lease exists")
	return wire.LineOf(l), l.Spec.RenewTime.Time
}

// A term's first post waits for a line chosen from the leader's view of
// the registry, two retry periods at most; then the line Lease is created
// posting the line, living twice the refresh. A change is written at once,
// with one conditional Update; an unchanged line again every refresh; and
// the end of the term reports the zero Line.
func TestPostWaitsForTheViewThenKeepsTheLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		cfg := testConfig(api, "a")
		leader := &fakeLeader{}
		sc := line(4, "w", "b")
		leader.set(4, sc, false)
		start := time.Now()
		stop := post(cfg, leader)
		synctest.Wait()
		assert.Nil(t, api.Lease(testNS, wire.LineName(testLease)), "the line carried over is not posted at once")

		time.Sleep(2 * rp)
		synctest.Wait()
		got, at := posted(t, api)
		assert.Equal(t, start.Add(2*rp), at, "posted two retry periods in")
		assert.True(t, Same(got, wire.Line{Holder: "a", Term: 4, Succession: sc}))
		assert.Equal(t, int32(2*refresh/time.Second), got.Seconds)
		assert.Equal(t, 2, leader.Count(VerbPost), "a read (missing), a create")
		lines, rvs := leader.writes()
		require.Len(t, lines, 1)
		assert.Equal(t, api.Lease(testNS, wire.LineName(testLease)).ResourceVersion, rvs[0], "reported with its resourceVersion")

		next := line(4, "w", "c")
		leader.set(4, next, true)
		synctest.Wait()
		got, at = posted(t, api)
		assert.True(t, Same(got, wire.Line{Holder: "a", Term: 4, Succession: next}))
		assert.Equal(t, start.Add(2*rp), at, "a change is written at once")
		assert.Equal(t, 3, leader.Count(VerbPost), "one Update, conditional on the last write")

		time.Sleep(refresh)
		synctest.Wait()
		got, at = posted(t, api)
		assert.True(t, Same(got, wire.Line{Holder: "a", Term: 4, Succession: next}))
		assert.Equal(t, start.Add(2*rp+refresh), at, "written again, unchanged, a refresh later")
		assert.Equal(t, 4, leader.Count(VerbPost))

		stop()
		lines, rvs = leader.writes()
		assert.Equal(t, wire.Line{}, lines[len(lines)-1], "the term's end")
		assert.Empty(t, rvs[len(rvs)-1])
	})
}

// A line chosen from the leader's view is posted at once.
func TestPostWithTheViewAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		leader := &fakeLeader{}
		leader.set(4, line(4, "w", "b"), true)
		start := time.Now()
		stop := post(testConfig(api, "a"), leader)
		synctest.Wait()
		_, at := posted(t, api)
		assert.Equal(t, start, at)
		stop()
	})
}

// The line Lease's version as the last leader wrote it is stale (another
// write came since): the conditional Update fails, the leader reads the
// line Lease and updates what is there.
func TestPostAfterAConflictReadsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		putLine(api, 3, line(3, "w", "b"))
		stale := api.Lease(testNS, wire.LineName(testLease)).ResourceVersion
		putLine(api, 3, line(3, "w", "c"))
		leader := &fakeLeader{version: stale}
		sc := line(4, "w", "b")
		leader.set(4, sc, true)
		stop := post(testConfig(api, "a"), leader)
		synctest.Wait()
		got, _ := posted(t, api)
		assert.True(t, Same(got, wire.Line{Holder: "a", Term: 4, Succession: sc}))
		assert.Equal(t, 3, leader.Count(VerbPost), "an Update (conflict), a read, an Update")
		stop()
	})
}

// A failed write is tried again after the retry backoff; a 403 turns
// posting off, reported once, and ends Post.
func TestPostRetriesAFailureAndStopsWhenForbidden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		cfg := testConfig(api, "a")
		api.Client("a").FailNext(1, relecttest.Error(500))
		leader := &fakeLeader{}
		leader.set(4, line(4, "w", "b"), true)
		start := time.Now()
		stop := post(cfg, leader)
		synctest.Wait()
		assert.Nil(t, api.Lease(testNS, wire.LineName(testLease)), "the read failed")
		time.Sleep(rp)
		synctest.Wait()
		_, at := posted(t, api)
		assert.Equal(t, start.Add(rp), at, "tried again after the backoff")
		stop()

		api.Client("a").FailVerb(relecttest.VerbUpdate, relecttest.Error(403))
		leader = &fakeLeader{}
		leader.set(5, line(5, "w", "b"), true)
		done := make(chan struct{})
		go func() {
			defer close(done)
			Post(context.Background(), cfg, leader)
		}()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Post goes on after a 403")
		}
		assert.Error(t, leader.refused(), "reported")
		lines, _ := leader.writes()
		assert.Equal(t, []wire.Line{{}}, lines, "nothing posted; the end reported")
	})
}

// A handover's line is one Update of the line Lease at the version known,
// naming the new holder.
func TestPostHandOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		putLine(api, 4, line(4, "w", "b"))
		rv := api.Lease(testNS, wire.LineName(testLease)).ResourceVersion
		var w Want
		w.Set(wire.Line{Holder: "a", Term: 4, Succession: line(4, "w", "b")}, true)
		w.SetHandOver("z", 5, *line(5, "w", "b"))
		l, ok := w.HandOver()
		require.True(t, ok)
		calls := &fakeCalls{}
		PostHandOver(t.Context(), testConfig(api, "a"), calls, l, rv)
		got, _ := posted(t, api)
		assert.Equal(t, "z", got.Holder)
		assert.Equal(t, "z", got.Succession.Next[0].Identity)
		assert.Equal(t, 1, calls.Count(VerbPost))
	})
}
