package eventq

import (
	"slices"
	"sync"
	"testing"
)

// drain returns what ch holds now, without waiting.
func drain(ch <-chan int) []int {
	var out []int
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, v)
		default:
			return out
		}
	}
}

func TestSendKeepsTheNewestAndCountsTheDropped(t *testing.T) {
	q := New[int](3)
	for i := range 10 {
		q.Send(i) // never blocks: nobody reads
	}
	if got := drain(q.Channel()); !slices.Equal(got, []int{7, 8, 9}) {
		t.Errorf("delivered %v, want the newest three in order: [7 8 9]", got)
	}
	if got := q.Dropped(); got != 7 {
		t.Errorf("Dropped() = %d, want 7", got)
	}
}

func TestCloseMakesAFreshChannel(t *testing.T) {
	q := New[int](2)
	q.Send(1)
	first := q.Channel()
	q.Close()
	if v, ok := <-first; !ok || v != 1 {
		t.Errorf("closed channel gave %d, %v: want the buffered 1, then the close", v, ok)
	}
	if _, ok := <-first; ok {
		t.Error("the closed channel is still open")
	}
	q.Send(2)
	second := q.Channel()
	if second == first {
		t.Fatal("Channel() after Close is the closed channel")
	}
	if got := drain(second); !slices.Equal(got, []int{2}) {
		t.Errorf("the next Run's channel delivered %v, want [2]", got)
	}
}

// TestConcurrentSendersStayOrdered: each sender's values arrive in the
// order it sent them, and every value is delivered or counted dropped.
func TestConcurrentSendersStayOrdered(t *testing.T) {
	const senders, each = 4, 500
	q := New[int](8)
	done := make(chan struct{})
	var got []int
	go func() {
		defer close(done)
		for v := range q.Channel() {
			got = append(got, v)
		}
	}()
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				q.Send(s*each + i)
			}
		})
	}
	wg.Wait()
	q.Close()
	<-done
	if n := uint64(len(got)) + q.Dropped(); n != senders*each {
		t.Errorf("delivered %d and dropped %d: %d, want %d", len(got), q.Dropped(), n, senders*each)
	}
	last := make([]int, senders)
	for i := range last {
		last[i] = -1
	}
	for _, v := range got {
		s := v / each
		if v <= last[s] {
			t.Fatalf("sender %d's %d arrived after its %d", s, v, last[s])
		}
		last[s] = v
	}
	t.Logf("delivered %d, dropped %d of %d", len(got), q.Dropped(), senders*each)
}
