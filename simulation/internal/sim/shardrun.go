package sim

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/relect/relect"
	leasewire "github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"
	"github.com/relect/relect/shardrange"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// How the runner plays shards (shards.go). Every relect candidate runs with
// Options.Shards; its ShardOptions.Run records each shard term
// (ShardHistory.Terms) and, while the term lasts, writes every RetryPeriod
// to that shard's store, guarded by the shard's fence (ShardStore), through
// the candidate's network to the stores (wire.go), as the election's
// leaders write to theirs.
//
// Each candidate's shard calls — its shard Leases', the shard table's, and
// the leader's list and watch of the shard Leases — go through an API
// handle of their own ("c3/shards"), so that they are told from the
// election's and the registry's (History.Calls, which the budget and call
// checkers read, holds only those; ShardHistory.Calls holds the shard
// calls). The schedule's faults on a candidate's handle hit both handles
// alike (FailNext: the next Count calls of each).
//
// A Kill is a crash for the shards too: from the instant it is applied, the
// dying process makes no shard call (its Electors cannot release their
// shard Leases, which must expire), while its election keeps its lease as
// TestSimulation's kill does (KeepLeaseOnCancel; shard Electors always
// release on cancel, so without this a kill would hand every shard over at
// once).

// shardHandleSuffix names a candidate's API handle for its shard calls.
const shardHandleSuffix = "/shards"

// shardObserverHandle is the API handle of the runner's watch of the shard
// Leases, the table and the registrations.
const shardObserverHandle = "shard-observer"

// ShardStore is the store the holders of shard write to, guarded by the
// shard's fence.
func ShardStore(shard string) Store { return Store("shard " + shard) }

// ShardHistory is what the shards did in one run.
type ShardHistory struct {
	Names     []string      // the shards, in configuration order
	JoinDelay time.Duration // as relect applies it
	Rolling   bool          // the schedule had a rolling restart
	// Ranges is the field whose hash the shards divide (Shards.Ranges;
	// "": plain shards).
	Ranges shardrange.Field

	// Terms are the calls of ShardOptions.Run, in the order they began.
	Terms []ShardTerm
	// Held are the spans during which a candidate's Elector.Shards listed
	// a shard, sampled as IsLeader is (see Play).
	Held []ShardSpan
	// Calls are the shard calls (see above).
	Calls []Call
	// Changes are the shard Leases' successive states; Tables the shard
	// table's; Registrations the registrations' presence, all as a watch
	// saw them.
	Changes       []ShardChange
	Tables        []TableChange
	Registrations []RegistrationChange
	// Crashes are the kills that cut a process's shard calls off.
	Crashes int
}

// ShardTerm is one call of ShardOptions.Run: its context alive in [Start,
// End).
type ShardTerm struct {
	Candidate int
	Run       int
	Identity  string
	Shard     string
	Number    int64  // TermFromContext (the shard Lease's), -1 if none
	Fence     string // FenceFromContext (the shard's fence)
	// Range is the range the context carried (shardrange.FromContext),
	// if Ranged.
	Range  shardrange.Range
	Ranged bool
	// Split is the split the term's candidate ran with (zero but for
	// range shards): its context must carry shardrange.Of(Split.Field,
	// shard, Split.Count).
	Split Split
	Start time.Duration
	End   time.Duration // -1 while alive
}

// Split is a split of the data into range shards: ShardOptions.Ranges
// and Count.
type Split struct {
	Field shardrange.Field
	Count int
}

// ShardSpan is an interval [From, To) during which Candidate's
// Elector.Shards listed Shard.
type ShardSpan struct {
	Candidate int
	Run       int
	Shard     string
	From, To  time.Duration
}

// ShardChange is one write of a shard's Lease, by a candidate or by hand.
type ShardChange struct {
	At       time.Duration
	Shard    string
	Deleted  bool
	Holder   string
	Released bool // a release (no holder, 1 s), not a hand edit
	ByHand   bool
}

// TableChange is one write of the shard table.
type TableChange struct {
	At        time.Duration
	Deleted   bool
	Malformed bool // no table in it (TableOf is nil)
	ByHand    bool
	Assigned  map[string]string
	Takers    map[string]string
	Out       map[string]string
}

// RegistrationChange is one write of a registration: whether identity is
// registered after it (a departed registration, with no holder, is not),
// and for how long the write keeps it live (its leaseDurationSeconds: the
// leader counts a registration live that long after it saw it change).
type RegistrationChange struct {
	At       time.Duration
	Identity string
	Present  bool
	Lives    time.Duration
}

// shardState is a runner's shards.
type shardState struct {
	r        *runner
	names    []string
	byLease  map[string]string // shard Lease name → shard
	table    string            // the shard table's name
	selector string            // the shard Leases' label selector
	handles  []*relecttest.Client
	h        *ShardHistory

	// Guarded by r.mu.
	handRVs   map[string]bool
	changeRVs []string              // the resourceVersion of each h.Changes
	tableRVs  []string              // ... of each h.Tables
	regs      map[string]string     // registration Lease name → identity
	open      map[spanKey]ShardSpan // Held spans not yet ended
}

type spanKey struct {
	c     int
	shard string
}

func newShardState(r *runner) *shardState {
	sh := r.s.Shards
	st := &shardState{r: r, names: sh.Names(), byLease: map[string]string{}, table: leasewire.ShardTableName(LeaseName),
		selector: leasewire.ShardSelector(LeaseName), handRVs: map[string]bool{}, regs: map[string]string{},
		open: map[spanKey]ShardSpan{}}
	st.h = &ShardHistory{Names: st.names, JoinDelay: sh.joinDelay(r.t), Rolling: sh.Rolling, Ranges: sh.Ranges}
	for _, n := range st.names {
		st.byLease[st.leaseName(n)] = n
		if r.impl == Relect {
			r.stores[ShardStore(n)] = &register{store: StoreFence} // compared as fences
		} else {
			r.stores[ShardStore(n)] = &register{store: StorePlain} // the baseline has no fence
		}
	}
	for i := range r.slots {
		c := r.api.Client(CandidateName(i) + shardHandleSuffix)
		c.SetLatency(RoundTrip)
		st.handles = append(st.handles, c)
	}
	r.h.Shards = st.h
	return st
}

// leaseName is the name of shard's Lease: a range shard's names its split
// (leasewire.ShardLeaseNameIn), so that shard "1" of 4 and of 8 are two
// Leases.
func (st *shardState) leaseName(shard string) string {
	split := ""
	if sh := st.r.s.Shards; sh.Ranges != "" && !sh.Named {
		split = leasewire.RangeSplit(string(sh.Ranges), sh.Count)
	}
	return leasewire.ShardLeaseNameIn(LeaseName, split, shard)
}

// isShard reports whether the Lease named name is a shard's or the table.
func (st *shardState) isShard(name string) bool {
	_, ok := st.byLease[name]
	return ok || name == st.table
}

// options is relect's ShardOptions for slot sl's Elector el.
func (st *shardState) options(sl *slot, el *relectElector) relect.ShardOptions {
	sh := st.r.s.Shards
	var split Split
	if !sh.Named && sh.Ranges != "" {
		split = Split{Field: sh.Ranges, Count: sh.Count}
	}
	o := relect.ShardOptions{JoinDelay: sh.JoinDelay, Run: func(ctx context.Context) { st.run(ctx, sl, el, split) }}
	if sh.Named {
		o.Names = slices.Clone(st.names)
	} else {
		o.Count, o.Ranges = sh.Count, sh.Ranges
	}
	return o
}

// run is ShardOptions.Run of a candidate of split (zero but for range
// shards): it records the term and writes to the shard's store until ctx
// ends.
func (st *shardState) run(ctx context.Context, sl *slot, el *relectElector, split Split) {
	r := st.r
	shard, _ := relect.ShardFromContext(ctx)
	f, _ := relect.FenceFromContext(ctx)
	n, ok := relect.TermFromContext(ctx)
	if !ok {
		n = -1
	}
	rg, ranged := shardrange.FromContext(ctx)
	r.mu.Lock()
	i := len(st.h.Terms)
	st.h.Terms = append(st.h.Terms, ShardTerm{Candidate: sl.idx, Run: int(el.runID.Load()), Identity: sl.identity,
		Shard: shard, Number: n, Fence: string(f), Range: rg, Ranged: ranged, Split: split, Start: r.now(), End: -1})
	r.mu.Unlock()
	r.poke()
	sl.startWrites(ctx, i, []termToken{{ShardStore(shard), string(f)}})
	<-ctx.Done()
	r.mu.Lock()
	st.h.Terms[i].End = r.now()
	r.mu.Unlock()
	r.poke()
}

// errShardCrashed is what a crashed process's shard calls return: they are
// never made.
var errShardCrashed = errors.New("sim: the process crashed")

// shardRouter sends one Elector's Lease calls to its candidate's handles:
// the shard calls to the shard handle (none once dead), the others to the
// candidate's own.
type shardRouter struct {
	st    *shardState
	shard kubernetes.Interface
	dead  atomic.Bool
}

// client returns the clientset slot sl's next Elector is built with, and
// its router.
func (st *shardState) client(sl *slot) (kubernetes.Interface, *shardRouter) {
	rt := &shardRouter{st: st, shard: st.handles[sl.idx].Clientset()}
	return &routedClientset{Interface: sl.cs, rt: rt}, rt
}

type routedClientset struct {
	kubernetes.Interface
	rt *shardRouter
}

func (c *routedClientset) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return routedCoordination{c.Interface.CoordinationV1(), c.rt}
}

type routedCoordination struct {
	coordinationv1client.CoordinationV1Interface
	rt *shardRouter
}

func (g routedCoordination) Leases(ns string) coordinationv1client.LeaseInterface {
	return &routedLeases{LeaseInterface: g.CoordinationV1Interface.Leases(ns),
		shard: g.rt.shard.CoordinationV1().Leases(ns), rt: g.rt}
}

// routedLeases is the Lease client of a routed clientset: the embedded
// client is the candidate's own handle.
type routedLeases struct {
	coordinationv1client.LeaseInterface
	shard coordinationv1client.LeaseInterface
	rt    *shardRouter
}

// to returns the client for a call on the Lease named name, or on the
// Leases opts select.
func (l *routedLeases) to(name string, opts *metav1.ListOptions) (coordinationv1client.LeaseInterface, error) {
	shard := l.rt.st.isShard(name)
	if opts != nil {
		if sel, err := fields.ParseSelector(opts.FieldSelector); err == nil {
			if n, ok := sel.RequiresExactMatch("metadata.name"); ok {
				shard = l.rt.st.isShard(n)
			}
		}
		// The leader's list of the shard Leases, or a range term's guard's
		// (of the Leases with a range label too).
		shard = shard || opts.LabelSelector == l.rt.st.selector || strings.HasPrefix(opts.LabelSelector, l.rt.st.selector+",")
	}
	switch {
	case !shard:
		return l.LeaseInterface, nil
	case l.rt.dead.Load():
		return nil, errShardCrashed
	}
	return l.shard, nil
}

func (l *routedLeases) Get(ctx context.Context, name string, o metav1.GetOptions) (*coordinationv1.Lease, error) {
	c, err := l.to(name, nil)
	if err != nil {
		return nil, err
	}
	return c.Get(ctx, name, o)
}

func (l *routedLeases) Create(ctx context.Context, lease *coordinationv1.Lease, o metav1.CreateOptions) (*coordinationv1.Lease, error) {
	c, err := l.to(lease.Name, nil)
	if err != nil {
		return nil, err
	}
	return c.Create(ctx, lease, o)
}

func (l *routedLeases) Update(ctx context.Context, lease *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	c, err := l.to(lease.Name, nil)
	if err != nil {
		return nil, err
	}
	return c.Update(ctx, lease, o)
}

func (l *routedLeases) Delete(ctx context.Context, name string, o metav1.DeleteOptions) error {
	c, err := l.to(name, nil)
	if err != nil {
		return err
	}
	return c.Delete(ctx, name, o)
}

func (l *routedLeases) List(ctx context.Context, o metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	c, err := l.to("", &o)
	if err != nil {
		return nil, err
	}
	return c.List(ctx, o)
}

func (l *routedLeases) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	c, err := l.to("", &o)
	if err != nil {
		return nil, err
	}
	return c.Watch(ctx, o)
}

// mirror applies a fault on candidate a.Target's handle to its shard
// handle too, and makes a Kill a crash of its shard calls. Nil-safe.
func (st *shardState) mirror(a Action) {
	if st == nil || a.Target < 0 {
		return
	}
	c := st.handles[a.Target]
	switch a.Kind {
	case FailNext:
		c.FailNext(a.Count, relecttest.Error(a.Code))
	case Fail:
		c.Fail(relecttest.Error(a.Code))
	case FailVerb:
		c.FailVerb(a.Verb, relecttest.Error(a.Code))
	case Latency:
		c.SetLatency(max(a.Delay, RoundTrip))
	case Partition:
		c.Partition()
	case Heal:
		c.Heal()
		c.SetLatency(RoundTrip)
	case Pause:
		c.Pause()
	case Resume:
		c.Resume()
	case Kill:
		r := st.r
		r.mu.Lock()
		el, _ := r.slots[a.Target].reuse.(*relectElector)
		switch {
		case r.impl != Relect:
			st.h.Crashes++ // the baseline's shard loops crash with the process (crashLock)
		case el != nil && el.router != nil && !el.router.dead.Swap(true):
			st.h.Crashes++
		}
		r.mu.Unlock()
	}
}

// healAll undoes every fault on the shard handles, at the end of the run.
// Nil-safe.
func (st *shardState) healAll() {
	if st == nil {
		return
	}
	for _, c := range st.handles {
		c.Resume()
		c.Heal()
		c.SetLatency(RoundTrip)
	}
}

// observe records c if it is a shard call, and reports whether it was the
// shard handles' (or the shard observer's). Nil-safe.
func (st *shardState) observe(c relecttest.Call) bool {
	if st == nil {
		return false
	}
	if c.Client == shardObserverHandle {
		return true
	}
	name, ok := strings.CutSuffix(c.Client, shardHandleSuffix)
	if !ok {
		return false
	}
	r := st.r
	idx, err := strconv.Atoi(name[1:])
	if err != nil || idx < 0 || idx >= len(r.slots) {
		panic("sim: call from unknown handle " + c.Client)
	}
	call := Call{Candidate: idx, Run: -1, Elector: -1, Verb: c.Verb, Name: c.Name,
		Start: c.Start.Sub(r.t0), End: c.End.Sub(r.t0)}
	if c.Err != nil {
		call.Err = errString(c.Err)
	}
	r.mu.Lock()
	if sl := r.slots[idx]; sl.runID >= 0 {
		call.Run, call.Elector = sl.runID, sl.elector
	}
	st.h.Calls = append(st.h.Calls, call)
	r.mu.Unlock()
	r.poke()
	return true
}

// sample records the changes of every candidate's Elector.Shards at the
// end of an instant (the sampler's take); final closes every span. Nil-safe.
func (st *shardState) sample(now time.Duration, final bool) {
	if st == nil {
		return
	}
	r := st.r
	held := map[spanKey]int{}
	if !final {
		for i, sl := range r.slots {
			b := sl.proc.Load()
			if b == nil {
				continue
			}
			p, ok := b.p.(*relectProcess)
			if !ok {
				continue
			}
			for _, sh := range p.el.e.Shards() {
				held[spanKey{i, sh}] = p.runID
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, sp := range st.open {
		if run, ok := held[k]; !ok || run != sp.Run {
			sp.To = now
			st.h.Held = append(st.h.Held, sp)
			delete(st.open, k)
		}
	}
	for k, run := range held {
		if _, ok := st.open[k]; !ok {
			st.open[k] = ShardSpan{Candidate: k.c, Run: run, Shard: k.shard, From: now}
		}
	}
}

// watch records every change of the shard Leases, the table and the
// registrations until the returned function is called. Nil-safe.
func (st *shardState) watch() (stop func()) {
	if st == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := st.r.api.Client(shardObserverHandle).Clientset().CoordinationV1().Leases(Namespace).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		panic("sim: watching the Leases: " + err.Error())
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if l, ok := ev.Object.(*coordinationv1.Lease); ok {
				st.observeLease(l, ev.Type == watch.Deleted)
			}
		}
	}()
	return func() {
		w.Stop()
		cancel()
		<-done
	}
}

// observeLease records one change of Lease l.
func (st *shardState) observeLease(l *coordinationv1.Lease, deleted bool) {
	r := st.r
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch shard, isShard := st.byLease[l.Name]; {
	case l.Name == st.table:
		tc := TableChange{At: now, Deleted: deleted}
		if !deleted {
			if t := leasewire.TableOf(l); t != nil {
				tc.Assigned, tc.Takers, tc.Out = t.Assigned, t.Takers, t.Out
			} else {
				tc.Malformed = true
			}
		}
		st.h.Tables = append(st.h.Tables, tc)
		st.tableRVs = append(st.tableRVs, l.ResourceVersion)
	case isShard:
		st.h.Changes = append(st.h.Changes, ShardChange{At: now, Shard: shard, Deleted: deleted,
			Holder: leasewire.Holder(l), Released: leasewire.Released(l)})
		st.changeRVs = append(st.changeRVs, l.ResourceVersion)
	case l.Name == LeaseName || l.Name == leasewire.LineName(LeaseName):
	default:
		reg, ok := leasewire.RegistrationOf(l)
		id := st.regs[l.Name]
		if ok {
			id = reg.Identity
			st.regs[l.Name] = id
		}
		if id != "" {
			st.h.Registrations = append(st.h.Registrations, RegistrationChange{At: now, Identity: id, Present: ok && !deleted,
				Lives: time.Duration(reg.Seconds) * time.Second})
		}
	}
}

// finish marks the hand edits, once the run is over. Requires r.mu.
func (st *shardState) finish() {
	if st == nil {
		return
	}
	for i, rv := range st.changeRVs {
		st.h.Changes[i].ByHand = st.handRVs[rv] || st.h.Changes[i].Deleted // no candidate deletes a shard Lease
	}
	for i, rv := range st.tableRVs {
		st.h.Tables[i].ByHand = st.handRVs[rv] || st.h.Tables[i].Deleted // nor the table
	}
	slices.SortStableFunc(st.h.Held, func(a, b ShardSpan) int { return cmp.Compare(a.From, b.From) })
}

// edit applies shard edit a, and returns why it was skipped, or "".
func (st *shardState) edit(a Action) (skipped string) {
	if st == nil {
		return "no shards"
	}
	r := st.r
	identity := func(c int) string {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.slots[c].identity
	}
	now := metav1.NewMicroTime(time.Now())
	lease := st.leaseName(st.names[a.Shard])
	edit := func(name string, f func(*coordinationv1.Lease)) string {
		var edited *coordinationv1.Lease
		if err := r.api.Edit(Namespace, name, func(l *coordinationv1.Lease) { f(l); edited = l }); err != nil {
			return "no Lease"
		}
		r.mu.Lock()
		st.handRVs[edited.ResourceVersion] = true
		r.mu.Unlock()
		return ""
	}
	del := func(name string) string {
		if r.api.Delete(Namespace, name) != nil {
			return "no Lease"
		}
		return ""
	}
	// table edits the table with f, if it holds one.
	table := func(f func(t *leasewire.Table)) string {
		if l := r.api.Lease(Namespace, st.table); l == nil || leasewire.TableOf(l) == nil {
			return "no table"
		}
		return edit(st.table, func(l *coordinationv1.Lease) {
			t := leasewire.TableOf(l)
			if t == nil {
				return
			}
			f(t)
			enc, _ := json.Marshal(t)
			l.Annotations[leasewire.AnnotationShardTable] = string(enc)
		})
	}
	switch a.Kind {
	case ShardSetHolder, ShardStranger:
		holder := strangerIdentity
		if a.Kind == ShardSetHolder {
			holder = identity(a.Holder)
		}
		return edit(lease, func(l *coordinationv1.Lease) { l.Spec.HolderIdentity, l.Spec.RenewTime = &holder, &now })
	case ShardDelete:
		return del(lease)
	case ShardEmptyHolder:
		return edit(lease, func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = new("") })
	case ShardZeroDuration:
		return edit(lease, func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = new(int32(0)) })
	case TableDelete:
		return del(st.table)
	case TableGarbage:
		return edit(st.table, func(l *coordinationv1.Lease) {
			if l.Annotations == nil {
				l.Annotations = map[string]string{}
			}
			l.Annotations[leasewire.AnnotationShardTable] = "{not a table"
		})
	case TableGive:
		holder := identity(a.Holder)
		return table(func(t *leasewire.Table) {
			if t.Assigned == nil {
				t.Assigned = map[string]string{}
			}
			t.Assigned[st.names[a.Shard]] = holder
		})
	case TableClear:
		return table(func(t *leasewire.Table) { t.Assigned, t.Takers = nil, nil })
	}
	panic("sim: not a shard edit: " + a.Kind.String())
}
