package bench

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Mark is one candidate's term beginning (Start: its OnStartedLeading was
// called) or ending (its term's context was done), at At.
type Mark[C comparable] struct {
	Who   C
	At    time.Time
	Start bool
}

// Terms records when the candidates of a fleet began and stopped leading,
// each candidate named by a C (an identity, or a backend's handle on a
// candidate). The zero Terms is empty and ready; it is safe for concurrent
// use.
type Terms[C comparable] struct {
	// Poll is how often Next looks for a new term; zero means 1 ms.
	Poll time.Duration

	mu    sync.Mutex
	marks []Mark[C] // guarded by mu, in the order recorded
}

// Started records that who began to lead at at.
func (l *Terms[C]) Started(who C, at time.Time) { l.add(Mark[C]{who, at, true}) }

// Stopped records that who's term ended at at.
func (l *Terms[C]) Stopped(who C, at time.Time) { l.add(Mark[C]{who, at, false}) }

func (l *Terms[C]) add(m Mark[C]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.marks = append(l.marks, m)
}

// Next waits up to limit for a term begun at or after from by a candidate
// other than not, and returns the earliest such start.
func (l *Terms[C]) Next(from time.Time, not C, limit time.Duration) (Mark[C], error) {
	poll := l.Poll
	if poll == 0 {
		poll = time.Millisecond
	}
	var next Mark[C]
	if !Await(limit, poll, func() bool {
		for _, m := range l.Between(from, time.Now().Add(time.Hour)) {
			if m.Start && m.Who != not {
				next = m
				return true
			}
		}
		return false
	}) {
		return Mark[C]{}, fmt.Errorf("no new term within %v", limit)
	}
	return next, nil
}

// Between returns the marks stamped in [from, to), earliest first.
func (l *Terms[C]) Between(from, to time.Time) []Mark[C] {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Mark[C]
	for _, m := range l.marks {
		if !m.At.Before(from) && m.At.Before(to) {
			out = append(out, m)
		}
	}
	slices.SortStableFunc(out, func(a, b Mark[C]) int { return a.At.Compare(b.At) })
	return out
}

// Latest returns the start of the latest term recorded, if any.
func (l *Terms[C]) Latest() (Mark[C], bool) {
	return l.last(func(m Mark[C]) bool { return m.Start })
}

// LastStart returns the start of who's last term, if it led.
func (l *Terms[C]) LastStart(who C) (Mark[C], bool) {
	return l.last(func(m Mark[C]) bool { return m.Start && m.Who == who })
}

// LastStop is when who's last term ended, or zero if none has.
func (l *Terms[C]) LastStop(who C) time.Time {
	m, _ := l.last(func(m Mark[C]) bool { return !m.Start && m.Who == who })
	return m.At
}

// last returns the last mark recorded that ok accepts.
func (l *Terms[C]) last(ok func(Mark[C]) bool) (Mark[C], bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.marks) - 1; i >= 0; i-- {
		if ok(l.marks[i]) {
			return l.marks[i], true
		}
	}
	return Mark[C]{}, false
}
