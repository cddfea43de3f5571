package shards

import (
	"maps"
	"slices"
	"time"

	"github.com/relect/relect/internal/shardplan"
	"github.com/relect/relect/internal/wire"
)

// The plan: the table the assigner's view asks for, from the rule of
// internal/shardplan. Every function here requires the assigner's mu.

// plan is the table the view asks for at now (see assign.go's comment):
// who is left out, where each shard is now, who may be given shards, who
// holds each shard next, and who takes it. Requires mu.
func (a *assigner) plan(regs []Registration, now time.Time) wire.Table {
	runs, differ := a.shardSets(regs)
	saved := a.table
	a.table = runnable(saved, runs) // a shard the table gives one that does not run it is not assigned
	defer func() { a.table = saved }()
	byID, out := a.roster(regs, now)
	a.settle(regs, byID, now)
	avoid := a.passedOver(now)
	current, anyHeld := a.current(byID, out, avoid, now)
	cands := a.candidates(regs, out, current, anyHeld, now)
	resting := a.pace.Pending()
	unseen := a.unregisteredHolders(byID, out, now)
	for _, id := range unseen {
		cands = append(cands, shardplan.Candidate{Identity: id, Weight: 1})
		resting[id] = true // keeps what it holds, gets no more
	}
	failing := a.pace.Failing()
	holders := a.holders(current, cands, avoid, resting, failing, runs, now)
	a.stamp(holders, now)
	takers := a.takers(holders, cands, failing, runs, now)
	if len(failing) == 0 {
		failing = nil
	}
	next := wire.Table{Assigned: holders, Takers: takers, Out: out, Failing: failing, Unseen: a.port.RegistrationVersions(unseen)}
	if len(differ) > 0 {
		next.Set, next.Differ = len(a.cfg.Shards), differ
	}
	if a.cfg.Ranges != "" {
		next.Split = wire.RangeSplit(a.cfg.Ranges, len(a.cfg.Shards))
	}
	return next
}

// settle judges the releases pending (shardpace.Settle) — a failure if
// its holder is registered with the same instance RetryPeriod later — and
// keeps the registrations' instances for the next releases. Requires mu.
func (a *assigner) settle(regs []Registration, byID map[string]Registration, now time.Time) {
	a.failed = append(a.failed, a.pace.Settle(now, a.cfg.RetryPeriod, func(id, instance string) bool {
		r, ok := byID[id]
		return ok && r.Instance == instance // not stopped, nor restarted
	})...)
	a.instances = map[string]string{}
	for _, r := range regs {
		a.instances[r.Identity] = r.Instance
	}
}

// candidates returns the registered candidates that may be given shards:
// not left out, and either holding one, or registered for JoinDelay, or
// any while no shard is held (anyHeld false: a first deployment).
func (a *assigner) candidates(regs []Registration, out, current map[string]string, anyHeld bool, now time.Time) []shardplan.Candidate {
	holds := map[string]bool{}
	for _, h := range current {
		holds[h] = true
	}
	var cands []shardplan.Candidate
	for _, r := range regs {
		if _, left := out[r.Identity]; left {
			continue
		}
		if holds[r.Identity] || !anyHeld || !now.Before(a.firstSeen[r.Identity].Add(a.cfg.JoinDelay)) {
			cands = append(cands, shardplan.Candidate{Identity: r.Identity, Weight: r.Weight})
		}
	}
	return cands
}

// holders returns each shard's next holder (shardplan.AssignPaced, the
// failing shards apart), none for a shard every candidate is passed over
// for, and tells the pacing who holds each shard. Requires mu.
func (a *assigner) holders(current map[string]string, cands []shardplan.Candidate, avoid map[string][]string, resting map[string]bool,
	failing map[string]int, runs func(identity, shard string) bool, now time.Time) map[string]string {
	apart := map[string]bool{}
	for sh := range failing {
		apart[sh] = true
	}
	holders := shardplan.AssignPaced(a.pace.KeepOrder(a.cfg.Shards), current, cands, avoid, resting, apart, runs)
	for _, sh := range a.cfg.Shards {
		if slices.Contains(avoid[sh], holders[sh]) {
			delete(holders, sh) // every candidate is passed over for it: it waits
		}
		if h := a.liveHolder(sh, now); h != "" {
			a.pace.Held(sh, h, now)
		}
	}
	return holders
}

// stamp records now as when the table gave each shard whose holder
// changes to it (assignedAt). Requires mu.
func (a *assigner) stamp(holders map[string]string, now time.Time) {
	for _, sh := range a.cfg.Shards {
		if a.table.Assigned[sh] != holders[sh] {
			a.assignedAt[sh] = now
		}
	}
}

// takers names a taker for every shard held where the plan keeps it: a
// candidate that follows its Lease, and takes it the moment its holder
// releases it (a graceful stop, its work given up) or it expires (a
// crash, a partition), without waiting for a table write. A shard the
// plan moves gets none: its new holder is the one to take it; nor does a
// failing shard, so that its next release waits for the plan (its
// pacing), and its moves change no healthy shard's taker (it counts in no
// load). A holder's shards spread over several takers (heirs), each
// counted as it is named (load), so that no taker is given more than its
// share. Requires mu.
func (a *assigner) takers(holders map[string]string, cands []shardplan.Candidate, failing map[string]int,
	runs func(identity, shard string) bool, now time.Time) map[string]string {
	q := newHeirs(cands, holders, failing, len(a.cfg.Shards))
	load := map[string]string{} // shard → who runs its Elector, takers counted too
	for sh, h := range holders {
		if failing[sh] == 0 {
			load[sh] = h
		}
	}
	takers := map[string]string{}
	for _, sh := range a.cfg.Shards {
		h := holders[sh]
		if h == "" || h != a.liveHolder(sh, now) || failing[sh] > 0 {
			continue
		}
		// The table's taker is kept while it is among those taking the
		// fewest of this holder's shards, of those with room for them (a
		// fixed point for a settled table); else another is named.
		fewest := slices.DeleteFunc(a.fewestOf(h, q.roomFor(h), q.byHolder), func(c shardplan.Candidate) bool { return !runs(c.Identity, sh) })
		t := a.table.Takers[sh]
		if !slices.ContainsFunc(fewest, func(c shardplan.Candidate) bool { return c.Identity == t }) {
			t = shardplan.Taker(load, h, fewest)
		}
		if t != "" {
			takers[sh] = t
			load["taker:"+sh] = t
			q.named(h, t)
		}
	}
	return takers
}

// heirs are the candidates that may take a holder's shards, with what
// each holds and takes so far.
type heirs struct {
	cands  []shardplan.Candidate
	shards int64
	held   map[string]int   // identity → healthy shards it holds
	weight map[string]int64 // identity → its weight
	total  int64            // the weights' sum
	// byHolder: holder → taker → shards of it named so far.
	byHolder map[string]map[string]int
}

func newHeirs(cands []shardplan.Candidate, holders map[string]string, failing map[string]int, shards int) *heirs {
	q := &heirs{cands: cands, shards: int64(shards), held: map[string]int{}, weight: map[string]int64{}, byHolder: map[string]map[string]int{}}
	for _, c := range cands {
		q.weight[c.Identity] = int64(c.Weight)
		q.total += int64(c.Weight)
	}
	for sh, id := range holders {
		if failing[sh] == 0 {
			q.held[id]++
		}
	}
	return q
}

// roomFor returns the heirs that could take one more of holder h's shards
// and stay within the quota they would have without h: fewer than
// ⌈S·w/(W − w_h)⌉ held and taken of h's so far — so that when h leaves,
// its takers hold its shards and nothing else moves. All the heirs if
// none has room.
func (q *heirs) roomFor(h string) []shardplan.Candidate {
	rest := q.total - q.weight[h]
	var room []shardplan.Candidate
	for _, c := range q.cands {
		if c.Identity == h || rest <= 0 {
			continue
		}
		quota := (q.shards*int64(c.Weight) + rest - 1) / rest
		if int64(q.held[c.Identity]+q.byHolder[h][c.Identity]) < quota {
			room = append(room, c)
		}
	}
	if len(room) == 0 {
		return q.cands
	}
	return room
}

// named counts t named the taker of one more of holder h's shards.
func (q *heirs) named(h, t string) {
	if q.byHolder[h] == nil {
		q.byHolder[h] = map[string]int{}
	}
	q.byHolder[h][t]++
}

// takerFor returns the table's taker of shard sh if it may take it: not
// its holder assigned, registered, not left out, not passed over for it.
func (a *assigner) takerFor(sh, assigned string, byID map[string]Registration, out map[string]string, avoid map[string][]string) string {
	t := a.table.Takers[sh]
	_, registered := byID[t]
	_, isOut := out[t]
	if t == "" || t == assigned || !registered || isOut || slices.Contains(avoid[sh], t) {
		return ""
	}
	return t
}

// fewestOf returns the candidates of heirs, other than holder, that are
// takers of the fewest of holder's shards (byHolder), so that one holder's
// shards go to several takers: each keeps its share when they take them.
func (a *assigner) fewestOf(holder string, heirs []shardplan.Candidate, byHolder map[string]map[string]int) []shardplan.Candidate {
	least := -1
	var out []shardplan.Candidate
	for _, c := range heirs {
		if c.Identity == holder {
			continue
		}
		switch n := byHolder[holder][c.Identity]; {
		case least < 0 || n < least:
			least, out = n, []shardplan.Candidate{c}
		case n == least:
			out = append(out, c)
		}
	}
	return out
}

// roster returns the registered candidates by identity, and who is left
// out: the table's list, less those deregistered and those whose
// registration changed since (back, as newcomers). It keeps firstSeen.
func (a *assigner) roster(regs []Registration, now time.Time) (byID map[string]Registration, out map[string]string) {
	out = maps.Clone(a.table.Out)
	if out == nil {
		out = map[string]string{}
	}
	byID = map[string]Registration{}
	for _, r := range regs {
		byID[r.Identity] = r
		if _, ok := a.firstSeen[r.Identity]; !ok {
			a.firstSeen[r.Identity] = now
		}
		if rv, ok := out[r.Identity]; ok && rv != r.RV {
			delete(out, r.Identity)
			a.firstSeen[r.Identity] = now
		}
	}
	for id := range a.firstSeen {
		if _, ok := byID[id]; !ok {
			delete(a.firstSeen, id)
		}
	}
	for id := range out {
		if _, ok := byID[id]; !ok {
			delete(out, id)
		}
	}
	return byID, out
}

// passedOver returns, at now, the candidates passed over for each shard
// that keeps failing (shardpace). Requires mu.
func (a *assigner) passedOver(now time.Time) map[string][]string {
	avoid := map[string][]string{}
	for _, sh := range a.cfg.Shards {
		if ids, _ := a.pace.Passed(sh, now); len(ids) > 0 {
			slices.Sort(ids)
			avoid[sh] = ids
		}
	}
	return avoid
}

// current returns each shard's holder as the plan starts from — the
// Lease's, or the table's where the table moved it or its Lease is free —
// and whether any shard is held or assigned; it leaves out (in out) the
// holders whose Lease expired and those given a free shard that did not
// take it.
func (a *assigner) current(byID map[string]Registration, out map[string]string, avoid map[string][]string, now time.Time) (
	current map[string]string, anyHeld bool) {
	fail := func(id string) {
		if r, ok := byID[id]; ok {
			out[id] = r.RV
		}
	}
	for id := range a.lost {
		fail(id)
		delete(a.lost, id)
	}
	// Two passes: a holder left out for one shard's expiry in the first
	// changes what the second makes of its other shards, whatever their
	// order.
	for range 2 {
		current, anyHeld = a.currentPass(&pass{byID: byID, out: out, avoid: avoid, fail: fail, now: now})
	}
	return current, anyHeld
}

// pass is what one pass of current reads: the registered candidates by
// identity, those left out (which fail adds to), those passed over for
// each shard, and the time.
type pass struct {
	byID  map[string]Registration
	out   map[string]string
	avoid map[string][]string
	fail  func(identity string)
	now   time.Time
}

// currentPass is one pass of current: for each shard, where it is now
// (currentOf), whether that counts as held, and not with one passed over
// for it. Requires mu.
func (a *assigner) currentPass(p *pass) (current map[string]string, anyHeld bool) {
	current = map[string]string{}
	for _, sh := range a.cfg.Shards {
		if _, ok := a.assignedAt[sh]; !ok {
			a.assignedAt[sh] = p.now
		}
		live, assigned := a.liveHolder(sh, p.now), a.table.Assigned[sh]
		if h := a.currentOf(sh, live, assigned, p); h != "" {
			current[sh] = h
		}
		// A shard whose Lease is still missing (a first deployment: it is
		// created LD after it was found missing) is held by nobody, and
		// the candidates registering meanwhile share it at once, not
		// after JoinDelay: the first plan may see only part of the fleet.
		if s := a.seen[sh]; live != "" || (current[sh] != "" && current[sh] == assigned && (s == nil || !s.missing)) {
			anyHeld = true
		}
		if slices.Contains(p.avoid[sh], current[sh]) {
			delete(current, sh) // it gave the shard up: to another
		}
	}
	return current, anyHeld
}

// currentOf returns who holds shard sh as the plan starts from ("" for
// nobody), its Lease held by live ("" if free, missing or expired) and the
// table giving it to assigned. Requires mu.
func (a *assigner) currentOf(sh, live, assigned string, p *pass) string {
	switch s := a.seen[sh]; {
	case live != "":
		return a.liveCurrent(sh, live, assigned, p)
	case s != nil && !s.missing && !s.released && s.holder != "":
		return a.expiredCurrent(sh, s, assigned, p)
	case s != nil && s.missing:
		// Created released (createMissing) once watched missing for LD;
		// until then the holder assigned waits.
		return assigned
	case s != nil && s.released && a.takerFor(sh, assigned, p.byID, p.out, p.avoid) != "":
		// Released (its holder stopped, or gave it up): its taker, which
		// follows the Lease, takes it at once.
		return a.unlessLate(sh, a.table.Takers[sh], p)
	case assigned != "":
		// Given a free shard, it takes it (or emptied by hand: waited
		// out, not free yet); unless it did not in time.
		return a.unlessLate(sh, assigned, p)
	}
	return ""
}

// liveCurrent is currentOf for a shard whose Lease live holds.
func (a *assigner) liveCurrent(sh, live, assigned string, p *pass) string {
	_, isOut := p.out[assigned]
	_, registered := p.byID[assigned]
	if live != assigned && registered && !isOut && a.table.Takers[sh] != live {
		return assigned // moved by the table: the holder steps down
	}
	// The table's holder, or a taker that took it.
	if _, liveOut := p.out[live]; liveOut {
		// Left out for another shard's expiry, this Lease not expired
		// yet: its taker, which follows it, takes it.
		if t := a.table.Takers[sh]; t != "" && t != live {
			if _, tOut := p.out[t]; !tOut {
				return t
			}
		}
	}
	return live
}

// expiredCurrent is currentOf for a shard whose Lease, seen held by
// s.holder, expired. A holder the table gave the shard to (or named its
// taker) before it expired stopped renewing: it is left out. One it was
// given to after (back under a new registration) is judged as any
// candidate given a free shard, and one the table never named (a record
// edited by hand) is nobody's failure. Its taker, which followed the
// Lease, takes it; or the holder assigned (a taker made holder).
func (a *assigner) expiredCurrent(sh string, s *shardSeen, assigned string, p *pass) string {
	failed := ""
	if (s.holder == assigned || s.holder == a.table.Takers[sh]) && !a.assignedAt[sh].After(s.at.Add(a.cfg.LeaseDuration)) {
		failed = s.holder
		p.fail(failed)
	}
	next := a.table.Takers[sh]
	if next == "" || next == failed {
		next = assigned
	}
	if next == "" || next == failed {
		return ""
	}
	return a.unlessLate(sh, next, p)
}

// unlessLate returns id, given shard sh while it is free, unless it is
// late to take it (late): then it fails, and nobody holds the shard.
func (a *assigner) unlessLate(sh, id string, p *pass) string {
	if a.late(sh, p.now) {
		p.fail(id)
		return ""
	}
	return id
}

// unregisteredHolders returns the holders of live shard Leases that the
// registry does not show (their registration deleted by hand) and that are
// not left out, sorted: one that renews its shard Leases lives, and keeps
// the shards it holds — it is given no new one until it registers again.
// Requires mu.
func (a *assigner) unregisteredHolders(byID map[string]Registration, out map[string]string, now time.Time) []string {
	var ids []string
	for _, sh := range a.cfg.Shards {
		h := a.liveHolder(sh, now)
		_, registered := byID[h]
		_, left := out[h]
		if h != "" && !registered && !left && !slices.Contains(ids, h) {
			ids = append(ids, h)
		}
	}
	slices.Sort(ids)
	return ids
}
