package leaserecord

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/relect/relect/relecttest"
)

// TestLockWritesTheLastObjectAnnotated: Create and Update write the record
// with the annotations annotate adds; Update writes the object last read
// or written (conditionally: a stale one conflicts), and fails before any.
func TestLockWritesTheLastObjectAnnotated(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	leases := api.Client("a").Clientset().CoordinationV1().Leases("ns")
	annotate := func(l *coordinationv1.Lease, rec *Record) {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations["test/holder"] = rec.HolderIdentity
	}
	ll := NewLock(leases, "ns", "x", "a", annotate)
	assert.Equal(t, "a", ll.Identity())
	assert.Equal(t, "ns/x", ll.Describe())
	require.Error(t, ll.Update(t.Context(), *held("a", t0, 1)), "no object yet")

	require.NoError(t, ll.Create(t.Context(), *held("a", t0, 1)))
	created := ll.Last()
	require.NotNil(t, created)
	assert.Equal(t, "a", created.Annotations["test/holder"])

	require.NoError(t, ll.Update(t.Context(), *held("b", t0, 2)))
	rec, raw, err := ll.Get(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "b", rec.HolderIdentity)
	assert.Equal(t, 2, rec.LeaderTransitions)
	assert.NotEmpty(t, raw)
	assert.Equal(t, "b", ll.Last().Annotations["test/holder"])

	ll.SetLast(created) // stale: the Update must conflict
	require.Error(t, ll.Update(t.Context(), *held("c", t0, 3)))
}
