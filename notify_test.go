package relect_test

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A slow OnNewLeader delays only its own calls, and what waits for it is
// bounded: a holder is a state, not an event, so of the holders observed
// while it is stuck, the oldest are dropped and the newest is announced
// last. Every event is still delivered (EventNewLeader), and Run returns
// once the waiting calls were made.
func TestSlowOnNewLeaderKeepsTheNewest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		putLease(api, "x000", 3600, 0) // held by others for as long as the test runs
		stuck := make(chan struct{})
		var mu sync.Mutex
		var calls []string
		a := newCandidate(t, api, "a", func(o *relect.Options) {
			o.EventBuffer = 1024
			o.OnNewLeader = func(id string) {
				if id == "x000" {
					<-stuck
				}
				mu.Lock()
				calls = append(calls, id)
				mu.Unlock()
			}
		})
		a.start()
		synctest.Wait() // the first holder's call is stuck
		const changes = 200
		for i := 1; i <= changes; i++ {
			require.NoError(t, api.SetHolder(ns, lease, fmt.Sprintf("x%03d", i)))
			time.Sleep(time.Millisecond)
		}
		synctest.Wait()
		close(stuck)
		synctest.Wait()
		mu.Lock()
		got := append([]string(nil), calls...)
		mu.Unlock()
		assert.Len(t, got, 1+16, "the stuck call, then the 16 newest holders")
		assert.Equal(t, "x000", got[0])
		assert.Equal(t, fmt.Sprintf("x%03d", changes), got[len(got)-1], "the newest holder last")
		assert.Equal(t, fmt.Sprintf("x%03d", changes-15), got[1], "the oldest waiting ones were dropped")
		a.stop()
		assert.Equal(t, 1+changes, a.count(relect.EventNewLeader), "every holder is an event")
	})
}
