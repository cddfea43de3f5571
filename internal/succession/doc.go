// Package succession is the succession component of relect: who tries to
// take the lease first when it is released or expires.
//
// The leader names its next few successors in the Lease itself
// (wire.AnnotationSuccession), chosen from the registry by priority; every
// follower learns them from the watch it already has, and waits its turn
// (Turn): the first in line at once, each next one a succession step
// later, and everyone else after them, spread over a retry period. So a
// change of leader is one acquiring write, not one from every follower; a
// dead successor delays it by one step. The rules here are pure: they
// decide when to try, never whether a takeover is safe — that stays
// client-go's expiry rule and the conditional write.
//
// The package holds:
//
//   - the registrations as read (Registration, RegistrationOf) and the
//     candidates as an Elector shows them (Candidate, whose fields are the
//     public relect.Candidate's, so that the core converts one to the
//     other);
//   - the ordering: who goes first (Turn, and the order the leader names
//     successors, keepers and the warden in);
//   - the Book: what one candidate knows of the line of succession and,
//     as leader, its view of the registry.
//
// # Port
//
// The component makes no API call and starts no goroutine. Its port is
// what the core gives it:
//
//   - a Config, built once from the Elector's resolved options: the
//     identity, Priority, LeaseDuration, whether the registry is on,
//     whether the line Lease may be posted, and the cooldown after a
//     streak of stuck handovers (work.Options.CooldownOf);
//   - the Leases the core observes (Book.Observe, Book.ObserveLine), the
//     registrations its registry reads (Book.Listed, Book.Changed,
//     Book.Gone), and the events of its terms (Book.Acquired,
//     Book.StuckReleasing, the registry or the line Lease forbidden).
//
// It gives back the line of succession to publish (Book.Next), the
// candidates it knows (Book.Known), the cooldowns (Book.CoolingAt), and the
// answers a HandOver and the work liveness component ask for
// (Book.MayLead, Book.SomeoneElse). It never imports the root package.
package succession
