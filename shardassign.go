package relect

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/relect/relect/internal/defaults"
	"github.com/relect/relect/internal/shardpace"
	"github.com/relect/relect/internal/shardplan"
	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// The leader's side of shards (shard.go): during its term the leader
// watches every shard Lease of the election with one watch (a label
// selector), keeps its view of the registry (registry.go), and writes the
// shard table whenever the assignment it computes (internal/shardplan)
// differs from the table's. It writes nothing else: a shard changes hands
// only on its own Lease.
//
// What it reads from each shard Lease, on its own clock: who holds it, and
// since when it has not changed. Each shard held gets a taker: a
// candidate that follows its Lease, so that it takes it the moment its
// holder releases it, or the moment the lease expires — within
// LeaseDuration + RetryPeriod of the holder's last renewal — without
// waiting for the leader. A holder whose Lease expired while the table
// gave it the shard, and a candidate given a free shard that did not take
// it within LeaseDuration + 2 × RetryPeriod, is left out (Table.Out) until
// its registration changes.

// shardSeen is one shard Lease as the leader last observed it.
type shardSeen struct {
	holder   string
	rv       string
	released bool // released by its holder (wire.Released)
	missing  bool
	at       time.Time // local time of the last change observed (or of the first observation)
	// listed: first seen in this term's list, missing or free since
	// before the term (a gap this leader did not see begin).
	listed bool
}

// assigner is one term's assignment of shards.
type assigner struct {
	cfg  *config
	gw   *gateway
	st   *state
	term int32

	// mu guards seen, pace and failed, which the observer writes; changed is
	// signalled after each change of them.
	mu         sync.Mutex
	changed    chan struct{}
	seen       map[string]*shardSeen // by shard
	listedOnce bool                  // seen reflects a list
	// watching: seen is kept by an open watch; while its list or watch
	// fails the view is stale, and nothing is judged from it.
	watching bool
	byLease  map[string]string     // shard Lease name → shard
	own      *coordinationv1.Lease // the table as last read or written; nil if missing
	table    wire.Table            // what own says
	// firstSeen is when this term first saw each registered identity:
	// JoinDelay counts from it. assignedAt is when the table (as this
	// term knows it) gave each shard to its holder.
	firstSeen  map[string]time.Time
	assignedAt map[string]time.Time
	// pace paces the shards whose work keeps failing (a holder released
	// one the table still gave it: its work stuck, or returned), by the
	// rule of internal/shardpace; failed are its failures not logged yet.
	pace   *shardpace.Pace
	failed []shardpace.Failure
	// lost are the holders whose shard Lease their taker took without a
	// release (observeLease): left out at the next plan.
	lost map[string]bool
	// writing is the table of the write in flight (nil if none): a
	// release it asked for may be observed before the write returns.
	writing *wire.Table
	stale   bool // own may be stale: read it before the next write
	// refused: the last write of the table was refused as invalid (and
	// logged, once until a write succeeds again); the next is not tried
	// before notBefore, from RetryPeriod doubling to BackoffMax (retry),
	// since each carries the whole table again.
	refused   bool
	trimmed   bool // the last plan was over tableLimit (warned once until it is not)
	retry     *expBackoff
	notBefore time.Time
	// warnedSet is the shard set each candidate whose set differs from
	// this leader's was last warned of (reportDiffer).
	warnedSet map[string]int
	// instances are the registrations' instances as the last plan saw
	// them: a release is a failure only if its holder's instance is the
	// same RetryPeriod later (shardpace.Settle).
	instances map[string]string
	// known are the table versions this term read or wrote (the last
	// few): a version the member saw that is not among them was written
	// by someone else (by hand), and own is stale.
	known []string
}

// assignShards assigns the shards while ctx (the term's) lasts.
func assignShards(ctx context.Context, cfg *config, st *state) {
	term, _ := TermFromContext(ctx)
	// A token bucket of its own (RateLimit and RateBurst, as the
	// election's): the assignment's calls never delay a renewal, nor wait
	// for one.
	a := &assigner{cfg: cfg, gw: newGateway(cfg, st), st: st, term: int32(term), seen: map[string]*shardSeen{}, byLease: map[string]string{},
		firstSeen: map[string]time.Time{}, assignedAt: map[string]time.Time{}, pace: newShardPace(cfg), lost: map[string]bool{}, stale: true,
		changed: make(chan struct{}, 1), retry: newRetryBackoff(cfg)}
	for _, sh := range cfg.shards {
		a.byLease[wire.ShardLeaseName(cfg.Name, sh)] = sh
	}
	// Half a retry period in, as the registry's list: not with the
	// acquisition's calls.
	if sleep(ctx, cfg.RetryPeriod/2) != nil {
		return
	}
	// The view of the shard Leases is kept by a goroutine of its own, so
	// that it stays as fresh as the watch while a table write waits for
	// the bucket; this one decides and writes.
	// Missing shard Leases are created by another, on spare tokens, so
	// that a first deployment's S creates never hold a decision back.
	var observer sync.WaitGroup
	observer.Go(func() { a.observe(ctx) })
	observer.Go(func() { a.creator(ctx) })
	defer observer.Wait()
	defer a.st.setShardsFailing(0)
	defer a.st.setShardSetsDiffer(0)
	tick := time.NewTicker(cfg.RetryPeriod / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-a.changed:
		}
		a.assign(ctx, time.Now())
	}
}

// observe keeps the view of the shard Leases until ctx is done: a list,
// then a watch from its version; a list again after an error.
func (a *assigner) observe(ctx context.Context) {
	retry := newRetryBackoff(a.cfg)
	selector := wire.ShardSelector(a.cfg.Name)
	for ctx.Err() == nil {
		var list *coordinationv1.LeaseList
		err := a.gw.do(ctx, verbListShardLeases, true, func(ctx context.Context) error {
			var err error
			list, err = a.cfg.leases.List(ctx, metav1.ListOptions{LabelSelector: selector})
			return err
		})
		if err != nil {
			if sleep(ctx, retry.next()) != nil {
				return
			}
			continue
		}
		a.mu.Lock()
		a.listed(list.Items, time.Now())
		a.mu.Unlock()
		a.signal()
		rv := list.ResourceVersion
		for ctx.Err() == nil {
			var w watch.Interface
			err := a.gw.do(ctx, verbWatchShardLeases, false, func(ctx context.Context) error {
				var err error
				w, err = a.cfg.leases.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: rv})
				return err
			})
			if err != nil {
				break
			}
			a.setWatching(true)
			broken := a.follow(ctx, w, &rv)
			a.setWatching(false)
			w.Stop()
			if broken {
				break
			}
			retry.reset()
		}
		if sleep(ctx, retry.next()) != nil {
			return
		}
	}
}

// setWatching records whether a watch keeps the view.
func (a *assigner) setWatching(on bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.watching = on
}

// signal wakes the decision after a change of the view.
func (a *assigner) signal() {
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

// follow reads w's events into the view until the watch ends (broken: an
// error event) or ctx is done.
func (a *assigner) follow(ctx context.Context, w watch.Interface, rv *string) (broken bool) {
	for {
		select {
		case <-ctx.Done():
			return false
		case ev, open := <-w.ResultChan():
			a.mu.Lock()
			end, broken := a.event(ev, open, rv)
			a.mu.Unlock()
			if end {
				return broken
			}
			a.signal()
		}
	}
}

// event reads one watch event into the view; end reports the watch's end.
func (a *assigner) event(ev watch.Event, open bool, rv *string) (end, broken bool) {
	e := a.gw.event(ev, open)
	switch e.kind {
	case watchClosed:
		return true, false
	case watchBroken:
		return true, true
	case leaseChanged:
		*rv = e.lease.ResourceVersion
		a.observeLease(e.lease, time.Now())
	case leaseDeleted:
		if e.lease != nil {
			*rv = e.lease.ResourceVersion
			if sh, ok := a.byLease[e.lease.Name]; ok {
				a.seen[sh] = &shardSeen{missing: true, at: time.Now()}
			}
		}
	case leaseProgress:
		*rv = e.lease.ResourceVersion
	}
	return false, false
}

// listed replaces the view of the shard Leases with a list seen at now: a
// Lease whose version is the one seen before keeps its time of change.
func (a *assigner) listed(items []coordinationv1.Lease, now time.Time) {
	a.listedOnce = true
	was := a.seen
	a.seen = map[string]*shardSeen{}
	for i := range items {
		if sh, ok := a.byLease[items[i].Name]; ok {
			a.seen[sh] = was[sh]
			a.observeLease(&items[i], now)
			if was[sh] == nil {
				a.seen[sh].listed = true
			}
		}
	}
	for _, sh := range a.cfg.shards {
		if a.seen[sh] == nil {
			// Missing since the list at the earliest: a gap in the watch
			// may have hidden a holder.
			a.seen[sh] = &shardSeen{missing: true, at: now, listed: was[sh] == nil}
		}
	}
}

// observeLease records shard Lease l, seen at now. Requires mu.
func (a *assigner) observeLease(l *coordinationv1.Lease, now time.Time) {
	sh, ok := a.byLease[l.Name]
	if !ok {
		return
	}
	s := a.seen[sh]
	if s != nil && !s.missing && s.rv == l.ResourceVersion {
		return
	}
	next := &shardSeen{holder: wire.Holder(l), rv: l.ResourceVersion, released: wire.Released(l), at: now}
	if s != nil && next.holder != "" && !next.released {
		if free := a.freeAt(sh, now); !free.IsZero() && !s.listed {
			a.st.shardGap(now.Sub(free))
		}
	}
	if s != nil && s.holder != "" && !s.released && !s.missing && next.holder != "" && !next.released &&
		s.holder == a.table.Holders[sh] && next.holder == a.table.Takers[sh] && next.holder != s.holder {
		// Taken by its taker without a release: the holder stopped
		// renewing and its lease expired, though this view may not have
		// seen it expire. It is left out as if it had (current).
		a.lost[s.holder] = true
	}
	if s != nil && s.holder != "" && next.released && a.table.Holders[sh] == s.holder &&
		(a.writing == nil || a.writing.Holders[sh] == s.holder) {
		// Released by the holder the table names: it gave the shard up
		// (its work was stuck, or returned, or it is leaving: Released
		// tells them apart). Not if the table being written moves it: its
		// holder may have seen that table before the write's answer came
		// back, and stepped down.
		if f := a.pace.Released(sh, s.holder, a.instances[s.holder], recordStreak(l), now); f != nil {
			a.failed = append(a.failed, *f)
		}
	}
	a.seen[sh] = next
}

// newShardPace is the pacing of cfg's failing shards (internal/shardpace):
// from Shards.Work.Cooldown doubling to its MaxCooldown with work
// liveness — the cooldowns a shard's own release record publishes —
// else from LeaseDuration doubling to an hour (WorkOptions' default).
func newShardPace(cfg *config) *shardpace.Pace {
	if w := cfg.Shards.Work; w.enabled() {
		return shardpace.New(w.Cooldown, w.MaxCooldown)
	}
	return shardpace.New(cfg.LeaseDuration, max(defaults.WorkMaxCooldown, cfg.LeaseDuration))
}

// recordStreak is the streak of stuck handovers a shard Lease's record
// carries (its holder's work was stuck); 0 if none.
func recordStreak(l *coordinationv1.Lease) int {
	if s := wire.SuccessionOf(l); s != nil {
		return int(s.Streak)
	}
	return 0
}

// liveHolder returns who holds shard sh by its Lease at now: the holder
// named, while the Lease has changed within LeaseDuration; "" if it is
// free, missing, or expired.
func (a *assigner) liveHolder(sh string, now time.Time) string {
	s := a.seen[sh]
	if s == nil || s.missing || s.released || s.holder == "" || !now.Before(s.at.Add(a.cfg.LeaseDuration)) {
		return ""
	}
	return s.holder
}

// freeAt returns since when shard sh's Lease may be taken by anyone (its
// release, deletion or expiry, as observed); zero if it is held.
func (a *assigner) freeAt(sh string, now time.Time) time.Time {
	s := a.seen[sh]
	switch {
	case s == nil:
		return time.Time{}
	case s.missing || s.released:
		return s.at
	case s.holder == "" && !now.Before(s.at.Add(a.cfg.LeaseDuration)):
		return s.at.Add(a.cfg.LeaseDuration) // emptied by hand, waited out
	case !now.Before(s.at.Add(a.cfg.LeaseDuration)):
		return s.at.Add(a.cfg.LeaseDuration)
	}
	return time.Time{}
}

// assign computes the table at now and writes it if it changed.
func (a *assigner) assign(ctx context.Context, now time.Time) {
	if now.Before(a.notBefore) {
		return // the last write was refused as invalid: backing off
	}
	a.mu.Lock()
	listed := a.listedOnce && a.watching
	a.mu.Unlock()
	// Plan only once a write could go out: with the bucket spent (a
	// first deployment's acquisitions each change the table), the next
	// write carries every change seen meanwhile, at once, instead of a
	// queue of stale tables one token apart — the last of which named the
	// last takers seconds late.
	if a.gw.ready(ctx) != nil {
		return
	}
	now = time.Now()
	if rv := a.st.shardTableSeen(); rv != "" && !slices.Contains(a.known, rv) {
		a.stale = true // edited by someone else: plan from what the members follow
	}
	if !listed || (a.stale && !a.readTable(ctx)) {
		return // no view of the shard Leases yet, or of the table
	}
	regs, loaded := a.st.shardView(now)
	if !loaded {
		return
	}
	a.mu.Lock()
	next := a.plan(regs, now)
	failed := a.failed
	a.failed = nil
	a.mu.Unlock()
	a.reportFailed(failed)
	a.st.setShardsFailing(len(next.Failing))
	// Within what the apiserver accepts (New checked the holders and
	// takers; candidates left out add to it): else fewer takers.
	if takers, outs := next.Fit(tableLimit); takers+outs > 0 {
		if !a.trimmed {
			a.st.logs.log(slog.LevelWarn, "relect: the shard table is at the apiserver's limit on a Lease's annotations: it names fewer takers (their shards move by the leader's writes, a watch hop later) or leaves out fewer failed candidates",
				"lease", a.cfg.describe, "takersDropped", takers, "outDropped", outs, "limitBytes", tableLimit)
		}
		a.trimmed = true
	} else {
		a.trimmed = false
	}
	a.reportDiffer(next.Differ)
	if maps.Equal(next.Holders, a.table.Holders) && maps.Equal(next.Takers, a.table.Takers) && maps.Equal(next.Out, a.table.Out) &&
		maps.Equal(next.Failing, a.table.Failing) && maps.Equal(next.Differ, a.table.Differ) &&
		maps.Equal(next.Unseen, a.table.Unseen) {
		return
	}
	a.write(ctx, next, now)
}

// plan is the table the view asks for at now (see the file's comment).
// Requires mu.
func (a *assigner) plan(regs []shardRegistration, now time.Time) wire.Table {
	runs, differ := a.shardSets(regs)
	saved := a.table
	a.table = runnable(saved, runs) // a shard the table gives one that does not run it is not assigned
	defer func() { a.table = saved }()
	byID, out := a.roster(regs, now)
	a.failed = append(a.failed, a.pace.Settle(now, a.cfg.RetryPeriod, func(id, instance string) bool {
		r, ok := byID[id]
		return ok && r.instance == instance // not stopped, nor restarted
	})...)
	a.instances = map[string]string{}
	for _, r := range regs {
		a.instances[r.identity] = r.instance
	}
	avoid := a.passedOver(now)
	current, anyHeld := a.current(byID, out, avoid, now)
	holds := map[string]bool{}
	for _, h := range current {
		holds[h] = true
	}
	var cands []shardplan.Candidate
	for _, r := range regs {
		if _, left := out[r.identity]; left {
			continue
		}
		if holds[r.identity] || !anyHeld || !now.Before(a.firstSeen[r.identity].Add(a.cfg.Shards.JoinDelay)) {
			cands = append(cands, shardplan.Candidate{Identity: r.identity, Weight: r.weight})
		}
	}
	resting := a.pace.Pending()
	unseen := a.unregisteredHolders(byID, out, now)
	for _, id := range unseen {
		cands = append(cands, shardplan.Candidate{Identity: id, Weight: 1})
		resting[id] = true // keeps what it holds, gets no more
	}
	failing := a.pace.Failing()
	apart := map[string]bool{}
	for sh := range failing {
		apart[sh] = true
	}
	holders := shardplan.AssignPaced(a.pace.KeepOrder(a.cfg.shards), current, cands, avoid, resting, apart, runs)
	for _, sh := range a.cfg.shards {
		if slices.Contains(avoid[sh], holders[sh]) {
			delete(holders, sh) // every candidate is passed over for it: it waits
		}
		if h := a.liveHolder(sh, now); h != "" {
			a.pace.Held(sh, h, now)
		}
	}
	// Every shard held where the plan keeps it gets a taker, which follows
	// its Lease: it takes it the moment its holder releases it (a graceful
	// stop, its work given up) or it expires (a crash, a partition),
	// without waiting for a table write. A shard the plan moves gets none:
	// its new holder is the one to take it; nor does a failing shard, so
	// that its next release waits for the plan (its pacing), and its
	// moves change no healthy shard's taker (it counts in no load). A
	// holder's shards spread over several takers, each counted as it is
	// named (load), so that no taker is given more than its share.
	heirs := cands
	takers := map[string]string{}
	load := map[string]string{} // shard → who runs its Elector, takers counted too
	for sh, h := range holders {
		if failing[sh] == 0 {
			load[sh] = h
		}
	}
	byHolder := map[string]map[string]int{} // holder → taker → shards of it named so far
	// roomFor returns the heirs that could take one more of holder h's
	// shards and stay within the quota they would have without h: fewer
	// than ⌈S·w/(W − w_h)⌉ held and taken of h's so far — so that when h
	// leaves, its takers hold its shards and nothing else moves. All the
	// heirs if none has room.
	held, weight, total := map[string]int{}, map[string]int64{}, int64(0)
	for _, c := range cands {
		weight[c.Identity] = int64(c.Weight)
		total += int64(c.Weight)
	}
	for sh, id := range holders {
		if failing[sh] == 0 {
			held[id]++
		}
	}
	roomFor := func(h string) []shardplan.Candidate {
		rest := total - weight[h]
		var room []shardplan.Candidate
		for _, c := range heirs {
			if c.Identity == h || rest <= 0 {
				continue
			}
			quota := (int64(len(a.cfg.shards))*int64(c.Weight) + rest - 1) / rest
			if int64(held[c.Identity]+byHolder[h][c.Identity]) < quota {
				room = append(room, c)
			}
		}
		if len(room) == 0 {
			return heirs
		}
		return room
	}
	for _, sh := range a.cfg.shards {
		h := holders[sh]
		if a.table.Holders[sh] != h {
			a.assignedAt[sh] = now
		}
		if h == "" || h != a.liveHolder(sh, now) || failing[sh] > 0 {
			continue
		}
		// The table's taker is kept while it is among those taking the
		// fewest of this holder's shards, of those with room for them (a
		// fixed point for a settled table); else another is named.
		fewest := slices.DeleteFunc(a.fewestOf(h, roomFor(h), byHolder), func(c shardplan.Candidate) bool { return !runs(c.Identity, sh) })
		t := a.table.Takers[sh]
		if !slices.ContainsFunc(fewest, func(c shardplan.Candidate) bool { return c.Identity == t }) {
			t = shardplan.Taker(load, h, fewest)
		}
		if t != "" {
			takers[sh] = t
			load["taker:"+sh] = t
			if byHolder[h] == nil {
				byHolder[h] = map[string]int{}
			}
			byHolder[h][t]++
		}
	}
	if len(failing) == 0 {
		failing = nil
	}
	next := wire.Table{Holders: holders, Takers: takers, Out: out, Failing: failing, Unseen: a.st.registrationVersions(unseen)}
	if len(differ) > 0 {
		next.Set, next.Differ = len(a.cfg.shards), differ
	}
	return next
}

// takerFor returns the table's taker of shard sh if it may take it: not
// its holder assigned, registered, not left out, not passed over for it.
func (a *assigner) takerFor(sh, assigned string, byID map[string]shardRegistration, out map[string]string, avoid map[string][]string) string {
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
func (a *assigner) roster(regs []shardRegistration, now time.Time) (byID map[string]shardRegistration, out map[string]string) {
	out = maps.Clone(a.table.Out)
	if out == nil {
		out = map[string]string{}
	}
	byID = map[string]shardRegistration{}
	for _, r := range regs {
		byID[r.identity] = r
		if _, ok := a.firstSeen[r.identity]; !ok {
			a.firstSeen[r.identity] = now
		}
		if rv, ok := out[r.identity]; ok && rv != r.rv {
			delete(out, r.identity)
			a.firstSeen[r.identity] = now
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
	for _, sh := range a.cfg.shards {
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
func (a *assigner) current(byID map[string]shardRegistration, out map[string]string, avoid map[string][]string, now time.Time) (
	current map[string]string, anyHeld bool) {
	fail := func(id string) {
		if r, ok := byID[id]; ok {
			out[id] = r.rv
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
		current, anyHeld = a.currentPass(byID, out, avoid, fail, now)
	}
	return current, anyHeld
}

// currentPass is one pass of current.
func (a *assigner) currentPass(byID map[string]shardRegistration, out map[string]string, avoid map[string][]string, fail func(string), now time.Time) (
	current map[string]string, anyHeld bool) {
	current = map[string]string{}
	for _, sh := range a.cfg.shards {
		live, assigned := a.liveHolder(sh, now), a.table.Holders[sh]
		if _, ok := a.assignedAt[sh]; !ok {
			a.assignedAt[sh] = now
		}
		_, isOut := out[assigned]
		_, registered := byID[assigned]
		switch s := a.seen[sh]; {
		case live != "" && live != assigned && registered && !isOut && a.table.Takers[sh] != live:
			current[sh] = assigned // moved by the table: the holder steps down
		case live != "":
			current[sh] = live // the table's holder, or a taker that took it
			if _, liveOut := out[live]; liveOut {
				// Left out for another shard's expiry, this Lease not
				// expired yet: its taker, which follows it, takes it.
				if t := a.table.Takers[sh]; t != "" && t != live {
					if _, tOut := out[t]; !tOut {
						current[sh] = t
					}
				}
			}
		case s != nil && !s.missing && !s.released && s.holder != "":
			// Expired. A holder the table gave the shard to (or named its
			// taker) before it expired stopped renewing: it is left out.
			// One it was given to after (back under a new registration)
			// is judged as any candidate given a free shard, and one the
			// table never named (a record edited by hand) is nobody's
			// failure.
			failed := ""
			if (s.holder == assigned || s.holder == a.table.Takers[sh]) && !a.assignedAt[sh].After(s.at.Add(a.cfg.LeaseDuration)) {
				failed = s.holder
				fail(failed)
			}
			// Its taker, which followed the Lease, takes it; or the
			// holder assigned (a taker made holder).
			next := a.table.Takers[sh]
			if next == "" || next == failed {
				next = assigned
			}
			switch {
			case next == "" || next == failed:
			case a.late(sh, now):
				fail(next) // given the expired shard, it did not take it
			default:
				current[sh] = next
			}
		case s != nil && s.missing:
			// Created released (createMissing) once watched missing for
			// LD; until then the holder assigned waits.
			if assigned != "" {
				current[sh] = assigned
			}
		case s != nil && s.released && a.takerFor(sh, assigned, byID, out, avoid) != "":
			// Released (its holder stopped, or gave it up): its taker,
			// which follows the Lease, takes it at once.
			if t := a.table.Takers[sh]; a.late(sh, now) {
				fail(t)
			} else {
				current[sh] = t
			}
		case assigned != "":
			if a.late(sh, now) {
				fail(assigned) // given a free shard, it did not take it
			} else {
				current[sh] = assigned // or emptied by hand: waited out, not free yet
			}
		}
		// A shard whose Lease is still missing (a first deployment: it is
		// created LD after it was found missing) is held by nobody, and
		// the candidates registering meanwhile share it at once, not
		// after JoinDelay: the first plan may see only part of the fleet.
		if s := a.seen[sh]; live != "" || (current[sh] != "" && current[sh] == assigned && (s == nil || !s.missing)) {
			anyHeld = true
		}
		if slices.Contains(avoid[sh], current[sh]) {
			delete(current, sh) // it gave the shard up: to another
		}
	}
	return current, anyHeld
}

// late reports whether the candidate the table gave shard sh to, free at
// now, has had LeaseDuration + 2 × RetryPeriod since the later of the
// shard's freeing and the assignment to take it. Requires mu.
func (a *assigner) late(sh string, now time.Time) bool {
	free := a.freeAt(sh, now)
	if free.IsZero() {
		return false
	}
	if free.Before(a.assignedAt[sh]) {
		free = a.assignedAt[sh]
	}
	return !now.Before(free.Add(a.cfg.LeaseDuration + 2*a.cfg.RetryPeriod))
}

// creator creates the missing shard Leases (createMissing) every half
// retry period while ctx lasts, once the view is kept by a watch.
func (a *assigner) creator(ctx context.Context) {
	tick := time.NewTicker(a.cfg.RetryPeriod / 2)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for ctx.Err() == nil && a.createMissing(ctx, time.Now()) {
		}
	}
}

// createMissing creates, released, one shard Lease this term has watched
// missing for LeaseDuration without a gap — the rule a follower creates a
// missing Lease by (docs/design.md, "revoked by hand") — so that its
// holder takes it at once; it reports whether it created one. It takes a
// spare token (gateway.doSpare): never one a table write needs. A Lease
// someone else created meanwhile is left alone (409 AlreadyExists), and
// the watch will show it.
func (a *assigner) createMissing(ctx context.Context, now time.Time) (created bool) {
	a.mu.Lock()
	var due []string
	if a.watching {
		for _, sh := range a.cfg.shards {
			if s := a.seen[sh]; s != nil && s.missing && !now.Before(s.at.Add(a.cfg.LeaseDuration)) {
				due = append(due, sh)
				break
			}
		}
	}
	a.mu.Unlock()
	for _, sh := range due {
		holder, one, zero := "", int32(1), int32(0)
		t := metav1.NewMicroTime(now)
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: a.cfg.Namespace, Name: wire.ShardLeaseName(a.cfg.Name, sh),
				Labels:      map[string]string{wire.LabelShardOf: wire.CandidateOf(a.cfg.Name)},
				Annotations: map[string]string{wire.AnnotationShard: sh, wire.AnnotationLease: a.cfg.Name}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &one, LeaseTransitions: &zero,
				AcquireTime: &t, RenewTime: &t},
		}
		a.mu.Lock()
		before := a.seen[sh]
		a.mu.Unlock()
		var out *coordinationv1.Lease
		err := a.gw.doSpare(ctx, verbCreateShardLease, true, func(ctx context.Context) error {
			var err error
			out, err = a.cfg.leases.Create(ctx, l, metav1.CreateOptions{})
			return err
		})
		a.mu.Lock()
		switch {
		case err == nil:
			if a.seen[sh] == before {
				// Unless the watch showed the Lease meanwhile (its holder
				// may have taken it already): the answer is older.
				a.observeLease(out, time.Now())
			}
		case apierrors.IsAlreadyExists(err):
			if s := a.seen[sh]; s != nil && s.missing {
				s.at = time.Now() // the watch will show it; no new try for LD
			}
		}
		a.mu.Unlock()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return false // try again at the next tick
		}
	}
	return len(due) > 0
}

// readTable reads the table Lease; it reports whether the view is usable.
func (a *assigner) readTable(ctx context.Context) bool {
	seen := a.st.shardTableSeen() // a read after it is at least as new
	var l *coordinationv1.Lease
	err := a.gw.do(ctx, verbGetShardTable, true, func(ctx context.Context) error {
		var err error
		l, err = a.cfg.leases.Get(ctx, wire.ShardTableName(a.cfg.Name), metav1.GetOptions{})
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		a.mu.Lock()
		a.own, a.table = nil, wire.Table{}
		a.mu.Unlock()
	case err != nil:
		return false
	default:
		t := wire.TableOf(l)
		if t == nil {
			t = &wire.Table{}
		}
		a.mu.Lock()
		a.own, a.table = l, *t
		a.mu.Unlock()
		a.remember(l.ResourceVersion)
	}
	a.remember(seen)
	a.stale = false
	return true
}

// remember adds table version rv to known, which keeps the last eight.
func (a *assigner) remember(rv string) {
	if rv == "" || slices.Contains(a.known, rv) {
		return
	}
	a.known = append(a.known, rv)
	if len(a.known) > 8 {
		a.known = slices.Delete(a.known, 0, len(a.known)-8)
	}
}

// write writes table t, conditionally on the version last read or
// written; after a failure the table is read again before the next try.
func (a *assigner) write(ctx context.Context, t wire.Table, now time.Time) {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: a.cfg.Namespace, Name: wire.ShardTableName(a.cfg.Name)}}
	if a.own != nil {
		l = a.own.DeepCopy()
	}
	wire.SetTable(l, a.cfg.Name, a.cfg.identity, a.term, &t, now)
	var out *coordinationv1.Lease
	a.mu.Lock()
	a.writing = &t
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.writing = nil
		a.mu.Unlock()
	}()
	err := a.gw.do(ctx, verbPostShardTable, true, func(ctx context.Context) error {
		var err error
		if a.own == nil {
			out, err = a.cfg.leases.Create(ctx, l, metav1.CreateOptions{})
		} else {
			out, err = a.cfg.leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		return err
	})
	if err != nil {
		a.stale = true
		if apierrors.IsInvalid(err) {
			// Not a passing failure: every write of this table will be
			// refused (over the 256 KiB of annotations, say), and no
			// shard moves while it is. Said once until a write succeeds
			// again; the calls are counted in Stats.Calls.
			if !a.refused {
				a.st.logs.log(slog.LevelError, "relect: the apiserver refuses the shard table; no shard is assigned or moved while it does",
					"lease", a.cfg.describe, "table", l.Name, "tableBytes", len(l.Annotations[wire.AnnotationShardTable]), "err", err)
			}
			a.refused = true
			a.notBefore = now.Add(a.retry.next())
		}
		return
	}
	if a.refused {
		a.refused, a.notBefore = false, time.Time{}
		a.retry.reset()
	}
	a.mu.Lock()
	moved := 0
	for sh, h := range t.Holders {
		if a.table.Holders[sh] != h {
			moved++
		}
	}
	a.own, a.table = out, t
	a.mu.Unlock()
	a.remember(out.ResourceVersion)
	a.st.shardsMoved(moved)
}

// shardGap counts a shard seen taken after it was free for d.
func (s *state) shardGap(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.ShardGaps++
	s.stats.ShardGapTime += d
}

// shardsMoved counts n shards whose holder a table write changed.
func (s *state) shardsMoved(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.ShardMoves += uint64(n)
}

// shardRegistration is a live registered candidate that takes part in
// shards, as the leader's view has it.
type shardRegistration struct {
	identity string
	weight   int32
	rv       string // its registration's resourceVersion
	set      string // its wire.AnnotationShardSet; "" if none
	instance string // its wire.AnnotationInstance: another after a restart
}

// shardView returns the live registered candidates that take part in
// shards (not standing by, a weight), by identity; loaded is false while
// this leader has not listed the registry.
func (s *state) shardView(now time.Time) (regs []shardRegistration, loaded bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := &s.succession
	if g.view == nil {
		return nil, false
	}
	for _, c := range g.view {
		if c.live(now) && !c.Standby && c.shardWeight > 0 {
			regs = append(regs, shardRegistration{identity: c.Identity, weight: c.shardWeight, rv: c.rv, set: c.shardSet, instance: c.instance})
		}
	}
	return regs, true
}

// reportFailed says each failure of a shard: a warning with its failures
// in a row and until when its holder is passed over for it, and Stats.
func (a *assigner) reportFailed(failed []shardpace.Failure) {
	for _, f := range failed {
		a.st.logs.log(slog.LevelWarn, "relect: a shard's work keeps failing: its holder gave it up; passed over for it, the shard goes to another candidate",
			"lease", a.cfg.describe, "shard", f.Shard, "holder", f.Holder, "failuresInARow", f.Streak, "passedOverUntil", f.Until.Format(time.RFC3339))
		a.st.shardFailed()
	}
}

// shardFailed counts one failure of a shard's work (reportFailed).
func (s *state) shardFailed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.ShardFailures++
}

// setShardsFailing records how many shards keep failing, as the leader
// last planned (0 once its term ends).
func (s *state) setShardsFailing(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.ShardsFailing = n
}

// unregisteredHolders returns the holders of live shard Leases that the
// registry does not show (their registration deleted by hand) and that are
// not left out, sorted: one that renews its shard Leases lives, and keeps
// the shards it holds — it is given no new one until it registers again.
// Requires mu.
func (a *assigner) unregisteredHolders(byID map[string]shardRegistration, out map[string]string, now time.Time) []string {
	var ids []string
	for _, sh := range a.cfg.shards {
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

// registrationVersions returns the resourceVersion of each of ids'
// registrations in the view of the registry ("" for one missing); nil for
// no ids.
func (s *state) registrationVersions(ids []string) map[string]string {
	if len(ids) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for _, id := range ids {
		out[id] = ""
	}
	for _, c := range s.succession.view {
		if _, ok := out[c.Identity]; ok {
			out[c.Identity] = c.rv
		}
	}
	return out
}
