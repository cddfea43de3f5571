package ondemand

import (
	"runtime"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestIdleCostsNoGoroutine: the goroutine runs only while drain finds
// work, and ends once it finds none.
func TestIdleCostsNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r Runner
		before := runtime.NumGoroutine()
		work := 3
		r.Kick(func() bool {
			if work == 0 {
				return false
			}
			work--
			return true
		})
		r.Wait()
		assert.Equal(t, 0, work, "drain ran until it found nothing")
		synctest.Wait()
		assert.Equal(t, before, runtime.NumGoroutine(), "no goroutine while idle")
	})
}

// TestKickWhileRunningDrainsAgain: work queued while drain runs, after it
// looked, is drained before the goroutine ends; one goroutine at a time.
func TestKickWhileRunningDrainsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r Runner
		var mu sync.Mutex
		queued, done, running, most := 0, 0, 0, 0
		entered, proceed := make(chan struct{}), make(chan struct{})
		drain := func() bool {
			mu.Lock()
			running++
			most = max(most, running)
			n := queued
			queued = 0
			mu.Unlock()
			if done == 0 {
				entered <- struct{}{}
				<-proceed
			}
			mu.Lock()
			running--
			done += n
			mu.Unlock()
			return false // it found work, but says not: only Kick's again makes it drain once more
		}
		mu.Lock()
		queued = 1
		mu.Unlock()
		r.Kick(drain)
		<-entered // drain has taken the first item
		mu.Lock()
		queued++
		mu.Unlock()
		r.Kick(drain) // while it runs
		close(proceed)
		r.Wait()
		assert.Equal(t, 2, done, "the item queued while drain ran was drained too")
		assert.Equal(t, 1, most, "one drain at a time")
	})
}
