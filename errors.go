package relect

import (
	"errors"
	"fmt"
	"runtime/debug"
)

var (
	// ErrInvalidOptions is wrapped by every error New returns for invalid
	// Options; the message names the field.
	ErrInvalidOptions = errors.New("invalid options")

	// ErrNotInitialized is returned by Run on an Elector that New did not
	// make (a zero Elector).
	ErrNotInitialized = errors.New("relect: Elector not made by New")

	// ErrAlreadyRunning is returned by Run when another Run of the same
	// Elector has not returned yet.
	ErrAlreadyRunning = errors.New("relect: Run is already active on this Elector")

	// ErrLeaseExpired ends a term when no renewal succeeded within
	// RenewDeadline of sending the last one that did: the lease may have
	// passed to another candidate.
	ErrLeaseExpired = errors.New("relect: lease expired: no renewal succeeded within the renew deadline")

	// ErrLeaseLost ends a term when the Lease is seen held by another
	// identity, or deleted.
	ErrLeaseLost = errors.New("relect: lease lost: held by another identity or deleted")

	// ErrYielded ends a term that Elector.Yield ended.
	ErrYielded = errors.New("relect: yielded")

	// ErrHandedOver ends a term that Elector.HandOver ended, or that a
	// Lease naming another preferred holder (spec.preferredHolder) asked
	// to hand over.
	ErrHandedOver = errors.New("relect: handed over")

	// ErrNotLeader is returned by Yield and HandOver when this candidate
	// does not lead at the moment of the call.
	ErrNotLeader = errors.New("relect: not leading")

	// ErrWorkReturned ends a term when OnStartedLeading returned while the
	// term was still valid.
	ErrWorkReturned = errors.New("relect: OnStartedLeading returned")
)

// PanicError reports a panic recovered from a callback. It ends the term when
// it comes from OnStartedLeading.
type PanicError struct {
	// Callback is the Options field name of the callback that panicked.
	Callback string
	// Value is what was passed to panic.
	Value any
	// Stack is the goroutine's stack at the panic, as runtime/debug.Stack
	// formats it.
	Stack []byte
}

// Error returns "relect: <Callback> panicked: <Value>".
func (p *PanicError) Error() string {
	return fmt.Sprintf("relect: %s panicked: %v", p.Callback, p.Value)
}

// Unwrap returns the panic value if it is an error.
func (p *PanicError) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}

// callSafely calls f and returns a *PanicError naming callback if it
// panicked.
func callSafely(callback string, f func()) (p *PanicError) {
	defer func() {
		if v := recover(); v != nil {
			p = &PanicError{Callback: callback, Value: v, Stack: debug.Stack()}
		}
	}()
	f()
	return nil
}
