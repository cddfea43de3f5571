package notify

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSlowCallbackKeepsTheNewest: while the callback is stuck, at most
// MaxQueued holders wait; the oldest are dropped (and told to onDrop), and
// the newest is called last, in order. Stop returns once they were called.
func TestSlowCallbackKeepsTheNewest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stuck := make(chan struct{})
		var mu sync.Mutex
		var calls, dropped []string
		n := New(func(id string) {
			if id == "x000" {
				<-stuck
			}
			mu.Lock()
			calls = append(calls, id)
			mu.Unlock()
		}, func(id string) {
			mu.Lock()
			dropped = append(dropped, id)
			mu.Unlock()
		})
		n.Push("x000")
		synctest.Wait() // the first call is stuck
		const pushes = 200
		for i := 1; i <= pushes; i++ {
			n.Push(fmt.Sprintf("x%03d", i))
		}
		close(stuck)
		n.Stop()
		assert.Len(t, calls, 1+MaxQueued, "the stuck call, then the newest")
		assert.Equal(t, "x000", calls[0])
		assert.Equal(t, fmt.Sprintf("x%03d", pushes-MaxQueued+1), calls[1], "the oldest waiting were dropped")
		assert.Equal(t, fmt.Sprintf("x%03d", pushes), calls[len(calls)-1], "the newest last")
		assert.Len(t, dropped, pushes-MaxQueued, "each dropped holder is told")
		assert.Equal(t, "x001", dropped[0])
	})
}

// TestNoCallbackNoGoroutine: without a callback, Push does nothing.
func TestNoCallbackNoGoroutine(t *testing.T) {
	n := New(nil, func(string) { t.Error("dropped without a callback") })
	for i := range 2 * MaxQueued {
		n.Push(fmt.Sprint(i))
	}
	n.Stop()
}
