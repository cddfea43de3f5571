package leasewatch

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func lease(rv string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "x", ResourceVersion: rv}}
}

// TestReadHandsEventsOnAndAdvancesTheVersion: each event but the end
// reaches Handle, after rv moved to its Lease's version; the server's
// close ends Read unbroken, an error event broken.
func TestReadHandsEventsOnAndAdvancesTheVersion(t *testing.T) {
	for _, c := range []struct {
		name   string
		end    func(w *watch.FakeWatcher)
		broken bool
	}{
		{"closed", func(w *watch.FakeWatcher) { w.Stop() }, false},
		{"broken", func(w *watch.FakeWatcher) { w.Error(&metav1.Status{Code: 410}) }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := watch.NewFake()
				var got []string
				r := Reader{Decode: Decode, Handle: func(e Event) {
					got = append(got, e.Lease.ResourceVersion)
				}}
				go func() {
					w.Add(lease("2"))
					w.Modify(lease("3"))
					w.Action(watch.Bookmark, lease("4"))
					w.Delete(lease("5"))
					c.end(w)
				}()
				rv := "1"
				assert.Equal(t, c.broken, r.Read(t.Context(), w, &rv))
				assert.Equal(t, []string{"2", "3", "4", "5"}, got)
				assert.Equal(t, "5", rv)
			})
		})
	}
}

// TestReadTicks: OnTick runs at each tick while the watch is read, and a
// done context ends Read unbroken.
func TestReadTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 35*time.Second)
		defer cancel()
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		ticks := 0
		r := Reader{Decode: Decode, Handle: func(Event) {}, Tick: tick.C, OnTick: func() { ticks++ }}
		rv := ""
		assert.False(t, r.Read(ctx, watch.NewFake(), &rv))
		assert.Equal(t, 3, ticks)
	})
}

// TestFollowResumesFromTheLastVersion: after a watch the server closed,
// Follow opens the next from the last version seen (calling Resuming);
// a broken watch ends it with ErrBroken; Watching brackets each watch.
func TestFollowResumesFromTheLastVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var from []string
		var watching []bool
		resumed := 0
		r := Reader{Decode: Decode, Handle: func(Event) {},
			Watching: func(on bool) { watching = append(watching, on) },
			Resuming: func() { resumed++ }}
		err := r.Follow(t.Context(), "7", func(ctx context.Context, rv string) (watch.Interface, error) {
			from = append(from, rv)
			w := watch.NewFake()
			go func() {
				if len(from) == 1 {
					w.Modify(lease("9"))
					w.Stop()
					return
				}
				w.Error(&metav1.Status{Code: 410})
			}()
			return w, nil
		})
		assert.ErrorIs(t, err, ErrBroken)
		assert.Equal(t, []string{"7", "9"}, from)
		assert.Equal(t, []bool{true, false, true, false}, watching)
		assert.Equal(t, 1, resumed)
	})
}

// TestFollowEnds: open's error is Follow's; a done context ends it with
// nil.
func TestFollowEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := Reader{Decode: Decode, Handle: func(Event) {}}
		boom := errors.New("boom")
		err := r.Follow(t.Context(), "", func(context.Context, string) (watch.Interface, error) { return nil, boom })
		require.ErrorIs(t, err, boom)

		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		err = r.Follow(ctx, "", func(context.Context, string) (watch.Interface, error) { return watch.NewFake(), nil })
		assert.NoError(t, err)
	})
}
