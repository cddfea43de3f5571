package sim

import (
	"testing"
	"testing/synctest"
	"time"
)

// wireRunner is a runner of one candidate for wire's tests.
func wireRunner(impl Impl) *runner {
	return newRunner(&Schedule{Seed: 1, Candidates: 1, Priority: []int32{0}, Standby: []bool{false},
		Timing: Timing{LeaseDuration: 2 * s, RenewDeadline: s, RetryPeriod: 500 * ms}}, impl)
}

// The network: latency delays a write (and beyond the writer's timeout
// leaves it maybe applied), a paused process sends once resumed, a
// partition holds writes until the heal delivers or loses them.
func TestWire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := wireRunner(Relect)
		wr := r.slots[0].wire
		send := func() { wr.send(Write{Store: StoreFence, Token: "1"}) }
		send()               // 0: RoundTrip
		wr.setLatency(2 * s) // beyond RenewDeadline
		send()               // 1: maybe applied
		wr.heal()
		time.Sleep(10 * ms) // write 0 is answered
		wr.pause()
		done := make(chan struct{})
		go func() {
			defer close(done)
			wr.waitResumed()
			send() // 2: sent at the resume
		}()
		time.Sleep(3 * s)
		wr.resume()
		<-done
		wr.partition()
		for range 8 {
			send() // 3…10: held
		}
		time.Sleep(490 * ms)
		wr.heal() // within the writers' timeout
		r.deliveries.Wait()
		ws := r.h.Writes
		if got := ws[0]; got.Sent != 0 || got.Applied != RoundTrip || got.Answered != RoundTrip || !got.Accepted {
			t.Errorf("write 0: %+v", got)
		}
		if got := ws[1]; got.Applied != 2*s || got.Answered != -1 {
			t.Errorf("write 1 (latency 2 s): %+v", got)
		}
		if got := ws[2]; got.Sent != 3010*ms || got.Applied != 3010*ms+RoundTrip {
			t.Errorf("write 2 (after the pause): %+v", got)
		}
		delivered, lost := 0, 0
		for _, got := range ws[3:] {
			switch {
			case got.Applied < 0:
				lost++
			case got.Applied == 3500*ms+RoundTrip && got.Answered == 3500*ms+RoundTrip:
				delivered++
			default:
				t.Errorf("held write: %+v", got)
			}
		}
		if delivered == 0 || lost == 0 {
			t.Errorf("the heal delivered %d held writes and lost %d: want some of each", delivered, lost)
		}
	})
}
