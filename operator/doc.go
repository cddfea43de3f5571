// Package operator is the operator's side of a relect election: what a tool
// reads from and asks of an election's Lease without running an Elector —
// the pending request and the requests themselves (RequestYield,
// RequestHandOver, WithdrawRequest: `relect yield`, `relect handover`), the
// registered candidates (ListCandidates), the holder's fencing token
// (Fence), and the shards, who is assigned and who holds each
// (ListShards): what `relect status` shows. It reads the Leases by the
// library's own rules: an annotation is bound to the holder and term it
// was written for, and a stale one is ignored.
//
// A program that elects needs none of it: package relect.
package operator
