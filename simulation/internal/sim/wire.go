package sim

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// The network between each candidate's process and the stores (store.go).
// It mirrors the faults of the candidate's Lease API handle: the schedule's
// Latency, Partition, Heal, Pause and Resume act on both. A write takes the
// latency its candidate has when it is sent (at least RoundTrip) to reach
// its store; in a partition it is held, and at the heal delivered or lost
// (one in two, drawn from a stream seeded by the seed and the candidate); a
// paused process sends nothing, and sends the write it had decided on once
// it resumes, with the token it had then. The writer waits for the outcome
// at most writeTimeout; a write whose outcome comes later (or never) is
// "maybe applied" for it, and reaches the store all the same.

// wire is one candidate's network to the stores. It is safe for concurrent
// use.
type wire struct {
	r *runner

	mu          sync.Mutex // guards the fields below
	latency     time.Duration
	partitioned bool
	held        []inflight    // writes sent during the partition
	paused      chan struct{} // closed at Resume; nil when not paused
	rng         *rand.Rand    // which held writes a heal loses
}

// inflight is a write on its way: its index in History.Writes, and the
// channel closed when its writer learns the outcome.
type inflight struct {
	i      int
	answer chan struct{}
}

func newWire(r *runner, idx int) *wire {
	return &wire{r: r, latency: RoundTrip, rng: rand.New(rand.NewPCG(r.s.Seed, 0x77697265+uint64(idx)))} // "wire"
}

// setLatency is the schedule's Latency.
func (w *wire) setLatency(d time.Duration) {
	w.mu.Lock()
	w.latency = max(d, RoundTrip)
	w.mu.Unlock()
}

// partition is the schedule's Partition: writes sent from now on are held.
func (w *wire) partition() {
	w.mu.Lock()
	w.partitioned = true
	w.mu.Unlock()
}

// heal is the schedule's Heal: the latency is back to RoundTrip, and each
// held write is delivered RoundTrip from now or lost.
func (w *wire) heal() {
	w.mu.Lock()
	held := w.held
	lost := make([]bool, len(held))
	for i := range held {
		lost[i] = w.rng.IntN(2) == 0
	}
	w.held, w.partitioned, w.latency = nil, false, RoundTrip
	w.mu.Unlock()
	for i, f := range held {
		if !lost[i] {
			w.deliverIn(RoundTrip, f)
		}
	}
}

// pause is the schedule's Pause: the process sends nothing until resume.
func (w *wire) pause() {
	w.mu.Lock()
	if w.paused == nil {
		w.paused = make(chan struct{})
	}
	w.mu.Unlock()
}

// resume is the schedule's Resume.
func (w *wire) resume() {
	w.mu.Lock()
	if w.paused != nil {
		close(w.paused)
		w.paused = nil
	}
	w.mu.Unlock()
}

// isPaused reports whether the process is paused.
func (w *wire) isPaused() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.paused != nil
}

// waitResumed returns once the process is not paused.
func (w *wire) waitResumed() {
	for {
		w.mu.Lock()
		ch := w.paused
		w.mu.Unlock()
		if ch == nil {
			return
		}
		<-ch
	}
}

// send records wr as sent now and sends it; the returned channel is closed
// when the writer may read the outcome (never, if it comes after
// writeTimeout or the write is lost).
func (w *wire) send(wr Write) <-chan struct{} {
	r := w.r
	wr.Sent, wr.Applied, wr.Order, wr.Answered = r.now(), -1, -1, -1
	r.mu.Lock()
	f := inflight{i: len(r.h.Writes), answer: make(chan struct{})}
	r.h.Writes = append(r.h.Writes, wr)
	r.mu.Unlock()
	w.mu.Lock()
	d, held := w.latency, w.partitioned
	if held {
		w.held = append(w.held, f)
	}
	w.mu.Unlock()
	if !held {
		w.deliverIn(d, f)
	}
	return f.answer
}

// deliverIn delivers f to its store d from now, in a timer of the runner's
// (r.deliveries).
func (w *wire) deliverIn(d time.Duration, f inflight) {
	r := w.r
	r.deliveries.Add(1)
	time.AfterFunc(d, func() {
		defer r.deliveries.Done()
		r.mu.Lock()
		wr := r.h.Writes[f.i]
		r.mu.Unlock()
		accepted, order := r.stores[wr.Store].write(wr.Token)
		now := r.now()
		answered := now-wr.Sent <= r.writeTimeout() && !w.isPaused()
		r.mu.Lock()
		r.h.Writes[f.i].Applied, r.h.Writes[f.i].Order, r.h.Writes[f.i].Accepted = now, order, accepted
		if answered {
			r.h.Writes[f.i].Answered = now
		}
		r.mu.Unlock()
		if answered {
			close(f.answer)
		}
	})
}

// writeTimeout is how long a writer waits for the outcome of a write: the
// RenewDeadline, a client timeout below the lease's duration.
func (r *runner) writeTimeout() time.Duration { return r.t.RenewDeadline }

// termToken is a store a term's writes go to, and the token they carry.
type termToken struct {
	store Store
	token string
}

// startWrites starts the writes of term (an index into History.Terms) of
// slot sl, whose context is ctx, in a goroutine of the runner's
// (r.writers): while ctx is alive, every RetryPeriod from now, one write to
// each of tokens' stores, all sent together (once the process is not
// paused), and their outcomes awaited for writeTimeout, with a context of
// their own. It returns at once; the goroutine returns once ctx is done
// and its last writes are answered or timed out.
func (sl *slot) startWrites(ctx context.Context, term int, tokens []termToken) {
	r := sl.r
	r.writers.Go(func() {
		tick := time.NewTicker(r.t.RetryPeriod)
		defer tick.Stop()
		for ctx.Err() == nil {
			sl.wire.waitResumed() // a write decided on before a pause goes out after it
			answers := make([]<-chan struct{}, len(tokens))
			for i, tt := range tokens {
				answers[i] = sl.wire.send(Write{Store: tt.store, Candidate: sl.idx, Term: term, Token: tt.token})
			}
			wctx, cancel := context.WithTimeout(context.Background(), r.writeTimeout())
			for _, a := range answers {
				select {
				case <-a:
				case <-wctx.Done():
				}
			}
			cancel()
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	})
}
