// Package relecttest is an in-memory Lease API for testing code that uses
// relect, or any client-go leader election, without a cluster.
//
// Unlike client-go's fake clientset, which neither sets nor checks
// resourceVersion (last write wins), a LeaseAPI behaves like the apiserver
// where leader election cares: every write bumps the object's
// resourceVersion, an Update with a stale one gets 409 Conflict, one without
// gets 422 Invalid, a Create of an existing Lease gets 409 AlreadyExists, the
// Lease spec and annotations (key syntax, 256 KiB in all) are validated
// as the apiserver validates them, and a watch
// delivers every change. Each candidate gets its own Client handle, with its
// own faults (errors, latency, partition, pause) and call counts, and the
// test can edit the Lease by hand as an operator would with kubectl.
//
// A watch resumes from any resourceVersion of the last 75 seconds (at
// least the last 100 changes of all Leases, at most 102,400), as the
// apiserver's watch cache does; one older than that gets 410 Gone ("too old
// resource version"). An open watch never drops an event: a slow reader's
// events wait for it.
//
// A LeaseAPI reads only the time package, so it works in real time and
// inside a testing/synctest bubble, where a 15-second lease runs in
// milliseconds. Create it inside the bubble when it is used there.
package relecttest
