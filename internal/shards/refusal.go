package shards

import (
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// refusal keeps whether the last call of one kind that the API answered
// was refused (403 Forbidden or 401 Unauthorized: RBAC without the verb),
// so that its caller warns once when a run of refusals begins, not at
// every retry: a list the shards need and may not make leaves a shard
// without work for good, and the calls that go on succeeding (the Leases'
// renewals, the election's watch) keep the "calls failing in a row"
// warning from ever firing. The zero value is ready; safe for concurrent
// use.
type refusal struct {
	mu      sync.Mutex
	refused bool // guarded by mu
}

// begins records err, the call's outcome (nil: answered), and reports
// whether it is a refusal after an answer (or the first call): the time
// to warn. Another failure — a timeout, the caller's context done — says
// nothing of RBAC and changes nothing.
func (r *refusal) begins(err error) bool {
	no := apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
	r.mu.Lock()
	defer r.mu.Unlock()
	warn := no && !r.refused
	if no || err == nil {
		r.refused = no
	}
	return warn
}
