package relect

import "github.com/relect/relect/internal/leaserecord"

// record is client-go's view of a Lease's spec; the rules relect applies to
// it (same record, release, handover, clamping, what client-go is shown)
// are internal/leaserecord's.
type record = leaserecord.Record
