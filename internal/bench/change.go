package bench

import (
	"fmt"
	"time"
)

// A Fleet is a backend's candidates on one Lease, as Change drives them
// through a change of leader; each candidate is named by a C. Its methods
// block, each for at most a limit of the backend's, and return an error
// naming the candidate and what did not happen in time.
type Fleet[C comparable] interface {
	// Renewal waits for a renewal of the Lease by leader sent at or after
	// from, and returns when the apiserver answered it.
	Renewal(leader C, from time.Time) (answered time.Time, err error)
	// Leave makes leader go, as the scenario played says (its Run
	// cancelled, its process killed, a Yield or a HandOver), and returns
	// the change's start: when it went or, for a crash, when its lease
	// expires.
	Leave(leader C) (start time.Time, err error)
	// Next waits for the first term begun at or after from by a candidate
	// other than not.
	Next(from time.Time, not C) (Mark[C], error)
}

// AfterRenewal waits until a quarter RetryPeriod (rp) after a renewal by
// leader, whose term began at term, sent at least a RetryPeriod into the
// term and now or later: a point between two renewals, none in flight,
// at the same phase of the renewals every time.
func AfterRenewal[C comparable](f Fleet[C], leader C, term time.Time, rp time.Duration) error {
	from := time.Now()
	if t := term.Add(rp); t.After(from) {
		from = t
	}
	answered, err := f.Renewal(leader, from)
	if err != nil {
		return fmt.Errorf("the leader leads but does not renew: %w", err)
	}
	time.Sleep(time.Until(answered.Add(rp / 4)))
	return nil
}

// Change plays one change of leader on f, the benchmark's one scenario
// driver for both backends: from cur, the current term, it waits until
// after a renewal (AfterRenewal), makes the leader go (Fleet.Leave) and
// waits for the next term by another candidate. It returns the change's
// start and the next term; what the change cost is the backend's to
// measure around it.
func Change[C comparable](f Fleet[C], cur Mark[C], rp time.Duration) (start time.Time, next Mark[C], err error) {
	if err := AfterRenewal(f, cur.Who, cur.At, rp); err != nil {
		return time.Time{}, Mark[C]{}, err
	}
	if start, err = f.Leave(cur.Who); err != nil {
		return time.Time{}, Mark[C]{}, err
	}
	if next, err = f.Next(start, cur.Who); err != nil {
		return time.Time{}, Mark[C]{}, fmt.Errorf("after the leader went: %w", err)
	}
	return start, next, nil
}
