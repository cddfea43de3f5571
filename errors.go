package relect

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/relect/relect/internal/problem"
	"github.com/relect/relect/internal/work"
)

var (
	// ErrInvalidOptions is matched (errors.Is) by every error New returns
	// for invalid Options, and by the check HealthCheck returns for invalid
	// HealthOptions: each invalid field is a *FieldError that unwraps to
	// it.
	ErrInvalidOptions = errors.New("relect: invalid options")

	// errNotInitialized is returned by Run on an Elector that New did not
	// make (a zero Elector).
	errNotInitialized = errors.New("relect: Elector not made by New")

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

	// ErrUnknownCandidate is returned by HandOver when the identity it
	// names is not a candidate this leader knows may take the lease, even
	// after one read of its registration: not registered (a typo, a
	// candidate that has just started and registers within 1.5
	// RetryPeriods, one that stopped, a plain client-go candidate, one with
	// the registry off), gone (its registration lapsed), or standing by;
	// the error's message says which. A
	// handover to it would leave the lease to nobody for twice the retry
	// period. HandOverOptions.Unregistered hands over to an unregistered one
	// anyway.
	ErrUnknownCandidate = errors.New("relect: unknown candidate")

	// ErrRegistryOff is wrapped by the EventError that reports the
	// candidate registry turned off for this Elector because a registry
	// call was forbidden (403): the message names the verb, the RBAC rule
	// and the opt-out (Options.DisableRegistry). The election goes on,
	// without a line of succession from this candidate.
	ErrRegistryOff = errors.New("relect: the candidate registry is off")

	// ErrDuplicateIdentity is wrapped by the EventError that reports
	// another process running with this Elector's Identity: it renewed the
	// Lease in that identity's name, or wrote its registration. Identities
	// must differ between candidates (Options.Identity); two processes
	// sharing one cannot tell each other's terms from their own. relect
	// stays safe — it treats the other's records as a stranger's — but
	// leads less often, and their registration flips between them.
	ErrDuplicateIdentity = errors.New("relect: another process uses this identity")

	// ErrWorkReturned ends a term when OnStartedLeading returned while the
	// term was still valid.
	ErrWorkReturned = errors.New("relect: OnStartedLeading returned")

	// ErrInvalidFence is wrapped by the errors of ParseFence and
	// Fence.Uint64 for text that is not a fence relect hands out (a
	// positive decimal integer without leading zeros), and for no fence.
	ErrInvalidFence = errors.New("relect: invalid fence")
)

// FieldError reports one invalid field of Options, or of HealthOptions. New
// returns one for every invalid field or relation between fields it finds,
// joined with errors.Join: errors.As finds the first, FieldErrors returns
// them all, and each matches ErrInvalidOptions (errors.Is).
type FieldError struct {
	// Field is the invalid field, qualified by its struct:
	// "Options.RenewDeadline", "HealthOptions.CutOffAfter".
	Field string
	// Related are the other fields the problem involves, qualified the same
	// way, in the order Problem names them: for a relation between fields
	// (RenewDeadline must be less than LeaseDuration), the other side. Nil
	// when the field is invalid on its own.
	Related []string

	// format and args make the problem; args of type fieldRef are fields
	// (Related), rendered by Problem's name.
	format string
	args   []any
}

// fieldRef is an argument of FieldError.format that names a field,
// qualified ("Options.LeaseDuration"); the components report theirs as
// problem.Ref, the same type.
type fieldRef = problem.Ref

// newFieldError returns the FieldError of field (in the struct of that
// name, unqualified: "Options", "RenewDeadline") with the problem
// format, args; fields that args name are given as fieldRef.
func newFieldError(structName, field, format string, args ...any) *FieldError {
	e := &FieldError{Field: structName + "." + field, format: format, args: args}
	for i, a := range args {
		if r, ok := a.(fieldRef); ok {
			e.args[i] = fieldRef(structName + "." + string(r))
			e.Related = append(e.Related, structName+"."+string(r))
		}
	}
	return e
}

// Problem says what is wrong with the field, naming each field it involves
// (Related) as name returns it, given the qualified name: a command line
// tool can name its flags instead. A nil name gives the fields' own names,
// unqualified ("must be less than LeaseDuration 15s").
func (e *FieldError) Problem(name func(field string) string) string {
	if name == nil {
		name = unqualified
	}
	args := make([]any, len(e.args))
	for i, a := range e.args {
		if r, ok := a.(fieldRef); ok {
			a = name(string(r))
		}
		args[i] = a
	}
	return fmt.Sprintf(e.format, args...)
}

// Error returns "relect: <Field> <Problem>", as in
// "relect: Options.RenewDeadline 20s must be less than LeaseDuration 15s".
func (e *FieldError) Error() string { return "relect: " + e.Field + " " + e.Problem(nil) }

// Unwrap returns ErrInvalidOptions.
func (e *FieldError) Unwrap() error { return ErrInvalidOptions }

// unqualified is a field's name without its struct's.
func unqualified(field string) string {
	if i := strings.LastIndexByte(field, '.'); i >= 0 {
		return field[i+1:]
	}
	return field
}

// FieldErrors returns every *FieldError in err's tree (errors.Join and %w
// wrapping included), in order: what New or a HealthCheck reported of
// invalid options. It returns nil if there is none.
func FieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(err error) {
		switch x := err.(type) {
		case nil:
		case *FieldError:
			out = append(out, x)
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(x.Unwrap())
		}
	}
	walk(err)
	return out
}

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

// ErrWorkStuck ends a term whose work was stuck (Options.Work): no beat
// within WorkOptions.BeatWindow, or WorkOptions.CheckFailures failures of
// the check in a row. It is wrapped with what showed it; it is also the
// Err of EventWorkStuck, and what HealthCheck reports when a leader's work
// has been stuck longer than HealthOptions.WorkStuckTimeout.
var ErrWorkStuck = work.ErrStuck

// Errors of the health check (Elector.HealthCheck). They are wrapped with
// the details; use errors.Is.
var (
	// ErrWorkOverrun: a term ended more than HealthOptions.WorkStopTimeout
	// ago and its OnStartedLeading has still not returned — or a shard's
	// term, and its ShardOptions.Run (the error names the shard). The work
	// may be acting as leader (or on the shard) without the lease, and Run
	// cannot campaign again (for that shard) until it returns. Restarting
	// the process is the remedy.
	ErrWorkOverrun = errors.New("relect: leader work still running after its term ended")

	// ErrCutOff: Lease API calls have kept failing for more than
	// HealthOptions.CutOffAfter, and nothing was heard from the API
	// meanwhile: no call succeeded, no watch delivered an event.
	ErrCutOff = errors.New("relect: cut off from the Lease API")
)
