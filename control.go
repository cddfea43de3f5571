package relect

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/relect/relect/internal/succession"
	"github.com/relect/relect/internal/wire"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Leadership controls, under the state's mutex: Yield, HandOver and an
// operator's requests (package operator), WaitForTerm and WaitForLeader.

// stepDown ends the current term for a Yield (to empty) or a HandOver to
// to, if this candidate leads now. The campaign then waits for the work to
// return, writes the release or handover record, and reports its outcome
// on the returned channel.
//
// A HandOver names a candidate this leader knows as a live registered one
// that may lead, unless unregistered. Before the leader has listed the
// registry (half a retry period into its term), it cannot tell: then
// stepDown returns a channel closed at the next change (wait), and the
// caller asks again (for a retry period at most: Elector.stepDown).
//
// A candidate the loaded view does not know as one that may lead is not
// refused at once: stepDown returns errConfirm, the caller reads its
// registration (candidateRead) and asks again with confirmed (and the
// read's error if it failed otherwise than NotFound), and only then is it
// refused, saying which case it is (unknownLocked).
//
// of is the term the caller asked of: nil on its first call, then the term
// that call returned (t). A term other than of — the one asked of ended
// while the caller waited or read, and this candidate leads again — is
// ErrNotLeader: a HandOver asked of one term never ends a later one.
func (s *state) stepDown(of *term, to string, unregistered, confirmed bool, readErr error) (t *term, done <-chan error, wait <-chan struct{}, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if !s.term.leading(now) || (of != nil && s.term != of) {
		return nil, nil, nil, ErrNotLeader
	}
	t = s.term
	if t.stepDown != nil {
		return t, nil, nil, errors.New("relect: a Yield or HandOver of this term is already under way")
	}
	if to != "" {
		if s.succession.StandingBy(to) {
			return t, nil, nil, fmt.Errorf("%w: %q stands by and never leads", ErrUnknownCandidate, to)
		}
		ok, loaded := s.succession.MayLead(to, now)
		registry := s.cfg.registry && !s.succession.RegistryOff()
		switch {
		case unregistered || ok:
		case registry && !loaded:
			return t, nil, s.changed, nil // listed within half a retry period
		case !registry:
			return t, nil, nil, fmt.Errorf("%w: %q: the candidate registry is off for this candidate, so it knows of none; "+
				"set HandOverOptions.Unregistered to hand over to it anyway", ErrUnknownCandidate, to)
		case !confirmed:
			return t, nil, nil, errConfirm
		default:
			return t, nil, nil, s.unknownLocked(to, now, readErr)
		}
	}
	return t, s.stepDownLocked(to), nil, nil
}

// errConfirm asks the caller of stepDown to read the registration of the
// candidate named, which the leader's view does not know as one that may
// lead, and to ask again (Elector.stepDown).
var errConfirm = errors.New("relect: confirm the candidate's registration")

// candidateRead records what a read of to's registration found, for a
// HandOver to a candidate the view did not know (stepDown): the
// registration (found), or none (err, NotFound among them). A registration
// the view lacked — written after the leader's list, its watch event not
// in yet — joins the view as a change would. It returns err unless it is
// NotFound (an answer, not a failure).
func (s *state) candidateRead(to string, l *coordinationv1.Lease, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		if c, ok := succession.RegistrationOf(l); ok && c.Identity == to {
			s.succession.Changed(c, time.Now())
		} else {
			s.succession.Gone(l.Name) // departed: its holder emptied
		}
	case apierrors.IsNotFound(err):
		s.succession.Gone(registrationName(s.cfg.Name, to))
	default:
		return err
	}
	return nil
}

// unknownLocked is the refusal of a HandOver to to, which the view does
// not know as a live registered candidate that may lead even after a read
// of its registration: it says which case it is. Requires mu.
func (s *state) unknownLocked(to string, now time.Time, readErr error) error {
	if err := readErr; err != nil {
		return fmt.Errorf("%w: %q is not a live registered candidate as this leader knows them, and reading its registration failed (%v): "+
			"try again, or set HandOverOptions.Unregistered", ErrUnknownCandidate, to, err)
	}
	if c := s.succession.Viewed(to); c != nil {
		return fmt.Errorf("%w: %q is gone: its registration was not renewed for %v (its lease duration, %ds, has passed; "+
			"its own clock last stamped it at %s): the candidate stopped without deregistering, or cannot reach the API",
			ErrUnknownCandidate, to, now.Sub(c.SeenAt).Round(time.Second), c.Seconds, c.RenewedAt.UTC().Format(time.RFC3339))
	}
	return fmt.Errorf("%w: %q is not registered: it has no registration. A relect candidate registers %v to %v after it starts "+
		"(half a RetryPeriod to 1.5 RetryPeriods), so one that has just started is not registered yet: try again then; "+
		"one that stopped has deregistered; a plain client-go candidate, or one with the registry off, never registers: "+
		"set HandOverOptions.Unregistered to hand over to it", ErrUnknownCandidate, to, s.cfg.RetryPeriod/2, s.cfg.RetryPeriod*3/2)
}

// stepDownLocked asks the current, leading term to step down for to (see
// stepDown). Requires mu.
func (s *state) stepDownLocked(to string) <-chan error {
	cause := ErrYielded
	if to != "" {
		cause = ErrHandedOver
	}
	return s.stepDownForLocked(to, cause)
}

// stepDownForLocked ends the current, leading term for cause, to release
// the lease (to empty) or hand it over to to once its work returned; the
// outcome of that write comes on the returned channel. Requires mu.
func (s *state) stepDownForLocked(to string, cause error) <-chan error {
	req := &stepDownRequest{to: to, done: make(chan error, 1)}
	s.term.stepDown = req
	s.endTermLocked(s.term, cause)
	return req.done
}

// await returns the current term's number and whether this candidate leads
// now, the holder last observed, and a channel closed at the next change of
// either.
func (s *state) await() (number int64, leading bool, leader string, changed <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	number, leading = s.leadingLocked(time.Now())
	return number, leading, s.leader, s.changed
}

// requestedLocked honours a Request in l addressed to this leader's term
// (package operator writes it): a Yield, or a HandOver under HandOver's rule — a candidate
// this leader knows from its registry as live and able to lead, unless the
// request says Unregistered; a standby never; and before the leader's
// first list of the registry, nobody but an Unregistered one (a request
// cannot wait: the next write removes it). A refusal is reported once (an
// EventError and a warning, saying why); the leader's next write removes
// the request. Requires mu.
func (s *state) requestedLocked(l *coordinationv1.Lease) {
	r, ok := wire.PendingRequest(l)
	if !ok || r.Holder != s.cfg.identity || !s.term.leading(time.Now()) || s.term.stepDown != nil {
		return
	}
	asked := []any{"lease", s.cfg.describe, "by", r.By, "at", r.At}
	var why string // a handover's refusal
	if r.To != "" {
		ok, listed := s.succession.MayLead(r.To, time.Now())
		switch {
		case s.succession.StandingBy(r.To):
			why = "it stands by"
		case r.Unregistered:
		case !s.cfg.registry || s.succession.RegistryOff():
			why = "this leader's candidate registry is off, so it knows of no candidate (ask with Unregistered, relect handover --unregistered)"
		case !listed:
			why = "this leader has not listed the registry yet, half a retry period into its term: ask again"
		case !ok && s.succession.Viewed(r.To) != nil:
			why = "it is gone: its registration lapsed unrenewed (it stopped without deregistering, or cannot reach the API)"
		case !ok:
			why = "it is not registered (a relect candidate registers half a retry period to 1.5 retry periods after it starts: ask again then; " +
				"a plain client-go candidate, or one with the registry off, never does: ask with Unregistered, relect handover --unregistered)"
		}
	}
	switch {
	case r.To == "":
		s.logs.Log(slog.LevelInfo, "relect: yielding, as requested", asked...)
	case why == "":
		s.logs.Log(slog.LevelInfo, "relect: handing over, as requested", append(asked, "to", r.To)...)
	default:
		if s.refused == r {
			return
		}
		s.refused = r
		err := fmt.Errorf("%w: a request (by %q at %s) to hand over to %q is refused: %s",
			ErrUnknownCandidate, r.By, r.At.Format(time.RFC3339), r.To, why)
		s.logs.Log(slog.LevelWarn, "relect: "+err.Error(), "lease", s.cfg.describe)
		s.emitLocked(Event{Kind: EventError, Err: err})
		return
	}
	s.stepDownLocked(r.To)
}

// mayHandOverLocked reports whether a preferred holder p may be handed
// over to without asking: not known to stand by, and, once the leader has
// listed the registry, a live registered candidate. (Before the list it
// cannot tell, and the request would be gone with the next renewal, which
// does not carry it.) Requires mu.
func (s *state) mayHandOverLocked(p string) bool {
	if s.succession.StandingBy(p) {
		return false
	}
	ok, loaded := s.succession.MayLead(p, time.Now())
	return ok || !loaded
}
