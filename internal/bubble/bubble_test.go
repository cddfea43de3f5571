package bubble_test

import (
	"testing"
	"testing/synctest"

	"github.com/relect/relect/internal/bubble"
)

// Goroutines counts the bubble's goroutines, blocked or running, and
// none outside it: a goroutine started outside the bubble, alive while
// the count is taken, is left out.
func TestGoroutines(t *testing.T) {
	if n := bubble.Goroutines(); n != 0 {
		t.Errorf("outside a bubble: %d, want 0", n)
	}
	outside, outsideDone := make(chan struct{}), make(chan struct{})
	go func() { <-outside; close(outsideDone) }()
	defer func() { close(outside); <-outsideDone }()
	synctest.Test(t, func(t *testing.T) {
		base := bubble.Goroutines()
		t.Logf("a bubble of synctest.Test that started nothing: %d goroutines", base)
		if base < 1 {
			t.Fatalf("%d goroutines in the bubble: the caller at least", base)
		}
		stop := make(chan struct{})
		done := make(chan struct{})
		for range 3 {
			go func() { <-stop; done <- struct{}{} }()
		}
		synctest.Wait()
		if n := bubble.Goroutines(); n != base+3 {
			t.Errorf("with 3 blocked goroutines: %d, want %d", n, base+3)
		}
		close(stop)
		for range 3 {
			<-done
		}
		synctest.Wait()
		if n := bubble.Goroutines(); n != base {
			t.Errorf("after they returned: %d, want %d", n, base)
		}
	})
}
