package ctrlrt

import "errors"

var (
	// ErrInvalidOptions is matched (errors.Is) by every error NewManager
	// and NewLock return for invalid options; each names the field.
	// Errors relect.New reports for Options.Elector match
	// relect.ErrInvalidOptions as well.
	ErrInvalidOptions = errors.New("ctrlrt: invalid options")

	// ErrManagerElection is returned by NewManager when the manager's own
	// leader election is configured: relect elects, and the manager must
	// run with manager.Options.LeaderElection false. (To keep the
	// manager's election, use NewLock instead of NewManager.)
	ErrManagerElection = errors.New("ctrlrt: the manager's own leader election is on")

	// ErrControllerOnManager is returned by Manager.Add for a controller
	// that needs leader election: a controller can be started only once,
	// and leader-only controllers must start afresh with every term. Build
	// them in Options.Setup, on the term's manager, instead.
	ErrControllerOnManager = errors.New("ctrlrt: a leader-only controller added to the long-lived manager")

	// ErrTermEnded is returned by the term's manager (the one Setup is
	// given) and by its cache when they are used after their term ended:
	// a runnable added then is not started, an event handler not
	// registered.
	ErrTermEnded = errors.New("ctrlrt: the term has ended")

	// ErrNotPerTerm is returned by the methods of the term's manager and
	// cache that configure what lives as long as the process — health
	// checks, metrics handlers, indexers, starting the manager or its
	// cache: do that on the Manager before it starts.
	ErrNotPerTerm = errors.New("ctrlrt: not allowed within a term")

	// ErrNotWarm is the readiness check's error until this replica has
	// synced the informers of Options.Informers and campaigns.
	ErrNotWarm = errors.New("ctrlrt: informers not synced yet")
)
