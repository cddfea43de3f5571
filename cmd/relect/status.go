package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/internal/pace"
	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/operator"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

const statusHead = `Usage: relect status [flags] NAMESPACE/NAME

Shows the Lease NAMESPACE/NAME as an election: its state, holder, term
(leaseTransitions, for people and logs), the fencing token of the holder's
term where its relect holder published one, how long ago it was renewed,
whether it is still valid, when it expires, and the candidates where the
library knows them (this relect publishes none).

States: held (a holder, still valid), handover (a relect leader handed
the lease over: the record names the successor, shown as from → to, who
may take it until the validity ends; nobody leads meanwhile), expired (a
holder that stopped renewing, or a handover nobody took), released (no
holder, leaseDurationSeconds 1: a release by client-go or relect),
no-holder (emptied otherwise, by hand: relect candidates wait it out),
missing (no such Lease).

Stuck work (relect's work liveness). The Lease carries the fleet's streak
of stuck handovers in a row and the candidates cooling after one (passed
over in the line of succession); the WORK column and a "work:" line show
them, the cooldowns' seconds left as of the status, and, while the holder
must hold before it may hand over for stuck work in turn, about when its
hold ends (the leader's own /leader says it exactly). Whether the holder's
work is stuck now only the holder knows: its /leader says work_stuck.

Validity. A follower judges a lease valid until leaseDurationSeconds after
the LOCAL time at which it first saw the current record; it never compares
the record's timestamps with its own clock. A single look cannot know when
a follower saw the record, so status estimates: valid while renewTime +
leaseDurationSeconds is after this machine's clock, which assumes the
holder's clock and this one agree (marked "estimate"). With --watch, status
judges as a follower does, from the local time it observed each change; the
first record counts as observed when the watch began, so an old record is
still shown valid for up to leaseDurationSeconds, as a new follower would
treat it.

Candidates are listed (a List and a Get) once, or with --watch when it
starts and again whenever the holder, the term or the line of succession
changes.

A request pending for the holder (relect yield, relect handover) is shown
on a line of its own ("request pending: ...") and in -o json as
pending_request, until the holder honours or refuses it. A stale request,
addressed to an earlier holder or term, is ignored by every candidate and
not shown.

Shards (relect's ShardOptions; run and sidecar --shards). When the
election has shards, status shows them after the candidates: a line
saying how many, whose shard table, and who holds how many, then a row
per shard — its state (as the election's), the holder its own Lease
names, the holder the table assigns (they differ while a shard moves),
the taker the table names to follow it (and take it when it is released
or expires),
its term, fence, validity (an estimate, renewTime against this machine's
clock) and expiry — and the candidates left out (given no shard until
their registration changes); in -o json as "shards" and "shard_table".
A candidate left out is marked so in the candidates line ("left_out" in
-o json): one the leader's line of succession still names is shown as
"named next #N, but left out of the shards", likely gone.
With --watch they are read again (a Get and a List) when the candidates
are, and when a row is printed and they were read 10 s ago or longer;
the table is printed again when they change.

Needs RBAC get on leases, list for the candidates and the shards, and
watch for --watch.
`

const statusTail = `Examples:
  relect status kube-system/kube-scheduler
  relect status -o json default/nightly-backup | jq -r .holder
  relect status --watch default/nightly-backup
  relect status -o json default/indexer | jq -r '.shards[] | "\(.shard) \(.holder)"'

Exit codes:
  0  the Lease was read (whatever its state), or --watch was stopped by
     SIGTERM or SIGINT
  1  the API server could not be read
  2  bad command line or kubeconfig
  3  the Lease does not exist (without --watch)
`

// leaseStatus is one look at a Lease, the JSON of -o json.
type leaseStatus struct {
	// Time is when the status was computed, on this machine's clock.
	Time   time.Time `json:"time"`
	Lease  string    `json:"lease"`
	Exists bool      `json:"exists"`
	// State is held, handover, expired, released, no-holder or missing.
	State  string `json:"state"`
	Holder string `json:"holder"`
	// Term is the Lease's leaseTransitions, for people and logs.
	Term int32 `json:"term"`
	// Fence is the holder's term's fencing token as its relect holder
	// published it (operator.Fence); absent for a client-go holder, a
	// released Lease, or a term only just begun.
	Fence                string     `json:"fence,omitempty"`
	AcquireTime          *time.Time `json:"acquire_time,omitempty"`
	RenewTime            *time.Time `json:"renew_time,omitempty"`
	RenewAgeSeconds      *float64   `json:"renew_age_seconds,omitempty"`
	LeaseDurationSeconds int32      `json:"lease_duration_seconds"`
	// Valid: a holder, and the validity below has not passed.
	Valid bool `json:"valid"`
	// Expires is when the validity ends (or ended).
	Expires *time.Time `json:"expires,omitempty"`
	// ValidityBasis says how Valid and Expires were judged: "renew-time"
	// (an estimate that assumes synchronized clocks) or "observed" (from
	// the local time this status observed the record, as a follower).
	ValidityBasis string `json:"validity_basis,omitempty"`
	// ObservedAt is when the current record was first observed (--watch).
	ObservedAt *time.Time `json:"observed_at,omitempty"`
	// Candidates are the candidates registered for the Lease (relect's
	// candidate registry; operator.ListCandidates), the leader first, then
	// the line of succession; CandidatesKnown is false when they could not
	// be listed (CandidatesError says why).
	Candidates      []candidateStatus `json:"candidates"`
	CandidatesKnown bool              `json:"candidates_known"`
	CandidatesError string            `json:"candidates_error,omitempty"`
	// Work is what the Lease says of stuck work: the fleet's streak of
	// stuck handovers, the holder's hold, the candidates cooling; absent
	// when it says nothing (workStatus).
	Work *workStatus `json:"work,omitempty"`
	// HandOver is present when the record is a handover: the state is
	// "handover" while it is valid, "expired" once nobody took it.
	HandOver *handoverStatus `json:"handover,omitempty"`
	// PendingRequest is the operator's request (relect yield, relect
	// handover; operator.PendingRequest) that the holder has yet to honour
	// or refuse; absent if there is none. A stale one — addressed to an
	// earlier holder or term, which every candidate ignores — is not
	// shown.
	PendingRequest *requestStatus `json:"pending_request,omitempty"`
	// Shards are the election's shards (relect.ShardOptions;
	// operator.ListShards), who is assigned and who holds each, and
	// ShardTable the table's own facts; both absent for an election
	// without shards (no shard table, no shard Lease). ShardsError says
	// why they are not known when reading them failed.
	Shards      []shardStatus     `json:"shards,omitempty"`
	ShardTable  *shardTableStatus `json:"shard_table,omitempty"`
	ShardsError string            `json:"shards_error,omitempty"`
}

// requestStatus is a pending request: operator.Request's fields, with
// Action before them.
type requestStatus struct {
	// Action is "yield" or "handover".
	Action string `json:"action"`
	operator.Request
}

// requestOf returns the request pending in lease, or nil.
func requestOf(lease *coordinationv1.Lease) *requestStatus {
	r, ok := operator.PendingRequest(lease)
	if !ok {
		return nil
	}
	action := "yield"
	if r.To != "" {
		action = "handover"
	}
	r.At = r.At.UTC()
	return &requestStatus{Action: action, Request: r}
}

// candidateStatus is one registered candidate.
type candidateStatus struct {
	Identity string `json:"identity"`
	Priority int32  `json:"priority"`
	Standby  bool   `json:"standby,omitempty"`
	Leader   bool   `json:"leader,omitempty"`
	// Successor is its place in the line of succession the leader
	// published (1: next), 0 if none.
	Successor int `json:"successor,omitempty"`
	// LeftOut: the shard table leaves it out (shardTableStatus.Out; set
	// by withShards). It let a shard it held expire, or did not take one
	// given it, and has not renewed its registration since, as a live
	// candidate that reads itself out does at once: likely gone. The
	// leader names it in the line of succession all the same until its
	// registration lapses (3 × its registration renewal), and a takeover
	// would wait a succession step for it.
	LeftOut bool `json:"left_out,omitempty"`
	// RenewedAt is when its registration was last renewed, by its clock.
	RenewedAt *time.Time `json:"renewed_at,omitempty"`
}

// The states of a Lease.
const (
	stateHeld     = "held"
	stateHandover = "handover"
	stateExpired  = "expired"
	stateReleased = "released"
	stateNoHolder = "no-holder"
	stateMissing  = "missing"
)

// withCandidates adds to st the candidates registered for its Lease, or
// why they are not known (err: listing them failed).
func withCandidates(st leaseStatus, cs []relect.Candidate, err error) leaseStatus {
	if err != nil {
		st.CandidatesError = err.Error()
		return st
	}
	st.CandidatesKnown = true
	st.Candidates = []candidateStatus{}
	for _, c := range cs {
		cst := candidateStatus{Identity: c.Identity, Priority: c.Priority, Standby: c.Standby, Leader: c.Leader, Successor: c.Successor}
		if !c.RenewedAt.IsZero() {
			t := c.RenewedAt.UTC()
			cst.RenewedAt = &t
		}
		st.Candidates = append(st.Candidates, cst)
	}
	return st
}

// statusOf computes the status of lease (nil: missing) at now. A zero
// observedAt estimates validity from the renew time; otherwise validity
// counts from observedAt, as a follower's does.
func statusOf(ref leaseRef, lease *coordinationv1.Lease, now, observedAt time.Time) leaseStatus {
	st := leaseStatus{Time: now, Lease: ref.String(), State: stateMissing}
	if lease == nil {
		return st
	}
	st.record(lease, now)
	if written := st.writtenAt(observedAt); !written.IsZero() {
		st.Work = workOf(lease, st.Holder, now, written)
	}
	if st.Holder == "" {
		st.State = stateNoHolder
		if wire.Released(lease) {
			st.State = stateReleased
		}
		return st
	}
	st.validity(lease, now, observedAt)
	return st
}

// record sets st's fields that lease's record says as it is: the holder,
// term, fence, durations and times, and the pending request.
func (st *leaseStatus) record(lease *coordinationv1.Lease, now time.Time) {
	spec := lease.Spec
	st.Exists = true
	st.Holder = ptrValue(spec.HolderIdentity)
	st.Term = ptrValue(spec.LeaseTransitions)
	st.Fence = string(operator.Fence(lease))
	st.LeaseDurationSeconds = ptrValue(spec.LeaseDurationSeconds)
	st.PendingRequest = requestOf(lease)
	if spec.AcquireTime != nil {
		t := spec.AcquireTime.UTC()
		st.AcquireTime = &t
	}
	if spec.RenewTime != nil {
		t := spec.RenewTime.UTC()
		age := now.Sub(t).Seconds()
		st.RenewTime, st.RenewAgeSeconds = &t, &age
	}
}

// writtenAt is when the record was written or observed: the basis of
// validity and cooldowns — observedAt if not zero, else the renew time,
// else the acquire time; zero if none is known.
func (st *leaseStatus) writtenAt(observedAt time.Time) time.Time {
	switch {
	case !observedAt.IsZero():
		return observedAt
	case st.RenewTime != nil:
		return *st.RenewTime
	case st.AcquireTime != nil:
		return *st.AcquireTime
	}
	return time.Time{}
}

// validity sets, for a held record, when it expires and its state at now:
// held, expired, or a handover (lease's), counting from observedAt if not
// zero, else from the renew (or acquire) time.
func (st *leaseStatus) validity(lease *coordinationv1.Lease, now, observedAt time.Time) {
	from := st.RenewTime
	st.ValidityBasis = "renew-time"
	if from == nil {
		from = st.AcquireTime
	}
	if !observedAt.IsZero() {
		from, st.ValidityBasis = &observedAt, "observed"
		st.ObservedAt = &observedAt
	}
	st.State = stateExpired
	if from != nil {
		expires := from.Add(time.Duration(st.LeaseDurationSeconds) * time.Second)
		st.Expires = &expires
		if now.Before(expires) {
			st.Valid, st.State = true, stateHeld
		}
	}
	if h := wire.HandOverOf(lease); h != nil {
		st.HandOver = &handoverStatus{From: h.From, To: h.To, Until: st.Expires}
		if st.Valid {
			st.State = stateHandover
		}
	}
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// statusPlan is a checked status command line.
type statusPlan struct {
	cluster clusterFlags
	output  string // table or json
	watch   bool
	timeout time.Duration // of each API request
	ref     leaseRef
}

// statusCommand is relect status.
func statusCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	plan, helped, err := parseStatus(args, stdout)
	if helped {
		return exitOK
	}
	if err != nil {
		return report(stderr, "status", err)
	}
	cfg, err := plan.cluster.restConfig()
	if err != nil {
		return report(stderr, "status", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return report(stderr, "status", err)
	}
	ref := plan.ref
	p := newStatusPrinter(stdout, plan.output, plan.watch)
	if !plan.watch {
		return readStatus(ctx, cs, ref, plan.timeout, p, stderr)
	}
	list := func(ctx context.Context) ([]relect.Candidate, error) {
		return operator.ListCandidates(ctx, cs, ref.namespace, ref.name)
	}
	shards := func(ctx context.Context) (operator.ShardTable, error) {
		return operator.ListShards(ctx, cs, ref.namespace, ref.name)
	}
	leases := cs.CoordinationV1().Leases(ref.namespace)
	if err := watchStatus(ctx, leases, list, shards, ref, plan.timeout, p, stderr); err != nil {
		return report(stderr, "status", err)
	}
	return exitOK
}

// parseStatus parses and checks the command line, everything but the
// kubeconfig.
func parseStatus(args []string, stdout io.Writer) (_ *statusPlan, helped bool, _ error) {
	p := &statusPlan{}
	fs := newFlagSet("status")
	p.cluster.define(fs)
	fs.StringVarP(&p.output, "output", "o", "table", "output format: table or json (with --watch: one JSON object per line)")
	fs.BoolVarP(&p.watch, "watch", "w", false, "keep watching, and show the Lease again on every change and when its validity passes")
	fs.DurationVar(&p.timeout, "request-timeout", 10*time.Second, "timeout of each API request (not of the watch)")
	helped, err := parseFlags(fs, args, statusHead, statusTail, stdout)
	if helped || err != nil {
		return nil, helped, err
	}
	var errs []error
	if fs.NArg() != 1 {
		errs = append(errs, fmt.Errorf("want one LEASE (NAMESPACE/NAME), got %d arguments: %q", fs.NArg(), fs.Args()))
	}
	if fs.NArg() >= 1 {
		if p.ref, err = parseLease(fs.Arg(0)); err != nil {
			errs = append(errs, err)
		}
	}
	if p.output != "table" && p.output != "json" {
		errs = append(errs, fmt.Errorf("--output %q: want table or json", p.output))
	}
	if p.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--request-timeout %v: want a positive duration", p.timeout))
	}
	if len(errs) > 0 {
		return nil, false, joinUsage(errs)
	}
	return p, false, nil
}

// readStatus prints the status of the Lease ref once, with its candidates
// and shards, each read within timeout; it returns the exit code:
// exitNotFound if the Lease does not exist.
func readStatus(ctx context.Context, cs kubernetes.Interface, ref leaseRef, timeout time.Duration, p *statusPrinter, stderr io.Writer) int {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	lease, err := cs.CoordinationV1().Leases(ref.namespace).Get(rctx, ref.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		lease = nil
	case err != nil:
		return report(stderr, "status", fmt.Errorf("reading Lease %s: %w", ref, err))
	}
	cands, cerr := operator.ListCandidates(rctx, cs, ref.namespace, ref.name)
	table, serr := operator.ListShards(rctx, cs, ref.namespace, ref.name)
	p.print(withShards(withCandidates(statusOf(ref, lease, time.Now(), time.Time{}), cands, cerr), table, serr))
	if lease == nil {
		fmt.Fprintf(stderr, "relect status: Lease %s does not exist\n", ref)
		return exitNotFound
	}
	return exitOK
}

// watchStatus prints the Lease as it is, then again on every change of its
// record and when its validity passes, until ctx is done. It reads the
// Lease, then watches that one object from the version read, and reads
// again when the watch ends. Errors other than a lack of permission are
// reported on stderr and retried, waiting 1 s doubling to 30 s. It lists
// the candidates with list (a List and a Get) when it starts and again
// whenever the holder, the term or the Lease's annotations (the line of
// succession) change — not at every renewal — so that each row shows who
// leads now. It reads the shards with shards (a Get and a List) whenever
// it lists the candidates, and when it prints a row and last read them
// shardsRefresh ago or longer: the shard Leases are not watched.
func watchStatus(ctx context.Context, leases coordinationv1client.LeaseInterface, list candidateLister, shards shardLister, ref leaseRef,
	timeout time.Duration, p *statusPrinter, stderr io.Writer) error {
	w := &statusWatch{leases: leases, list: list, shards: shards, timeout: timeout, ref: ref, p: p, expiry: time.NewTimer(time.Hour)}
	defer w.expiry.Stop()
	retry := time.Second
	for ctx.Err() == nil {
		wi, err := w.start(ctx, timeout)
		switch {
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			return fmt.Errorf("lease %s (--watch needs RBAC get and watch on leases): %w", ref, err)
		case err != nil:
			if ctx.Err() == nil {
				fmt.Fprintf(stderr, "relect status: Lease %s: %v (retrying in %v)\n", ref, err, retry)
			}
			_ = pace.Sleep(ctx, retry)
			retry = min(2*retry, 30*time.Second)
			continue
		}
		retry = time.Second
		w.follow(ctx, wi)
		wi.Stop()
	}
	return nil
}

// candidateLister lists the candidates registered for the Lease
// (operator.ListCandidates).
type candidateLister func(ctx context.Context) ([]relect.Candidate, error)

// statusWatch is the state of watchStatus: the current record and when it
// was first observed, as a follower keeps them, and the candidates listed
// for it.
type statusWatch struct {
	leases     coordinationv1client.LeaseInterface
	list       candidateLister
	timeout    time.Duration // of each request
	ref        leaseRef
	p          *statusPrinter
	current    *coordinationv1.Lease // nil: missing
	observedAt time.Time
	expiry     *time.Timer // fires when the current record's validity passes

	// cands and candsErr are what list returned for the record of key
	// listedFor (candidatesKey); listed is false before the first list.
	cands     []relect.Candidate
	candsErr  error
	listedFor string
	listed    bool

	// shards reads the shards; table and tableErr are what it last
	// returned, at tableAt (zero before the first read).
	shards   shardLister
	table    operator.ShardTable
	tableErr error
	tableAt  time.Time
}

// candidatesKey is what of l decides who the candidates list as leader
// and next in line: its holder, its term and its annotations (relect's
// line of succession), but not its renew time.
func candidatesKey(l *coordinationv1.Lease) string {
	if l == nil {
		return "missing"
	}
	key, _ := json.Marshal([]any{ptrValue(l.Spec.HolderIdentity), ptrValue(l.Spec.LeaseTransitions), l.Annotations})
	return string(key)
}

// listCandidates lists the candidates again if the record changed in what
// they show (candidatesKey) since they were last listed.
func (w *statusWatch) listCandidates(ctx context.Context) {
	key := candidatesKey(w.current)
	if w.listed && key == w.listedFor {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	w.cands, w.candsErr = w.list(lctx)
	w.listedFor, w.listed = key, true
	w.readShards(ctx)
}

// readShards reads the shards (shards).
func (w *statusWatch) readShards(ctx context.Context) {
	if w.shards == nil {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	w.table, w.tableErr = w.shards(rctx)
	w.tableAt = time.Now()
}

// start reads the Lease, shows it, and opens a watch from the version read.
func (w *statusWatch) start(ctx context.Context, timeout time.Duration) (watch.Interface, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	lease, err := w.leases.Get(rctx, w.ref.name, metav1.GetOptions{})
	cancel()
	rv := ""
	switch {
	case apierrors.IsNotFound(err):
		w.show(ctx, nil)
	case err != nil:
		return nil, fmt.Errorf("reading: %w", err)
	default:
		w.show(ctx, lease)
		rv = lease.ResourceVersion
	}
	wi, err := w.leases.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + w.ref.name, ResourceVersion: rv})
	if err != nil {
		return nil, fmt.Errorf("watching: %w", err)
	}
	return wi, nil
}

// follow shows every change the watch delivers, and the record again when
// its validity passes, until the watch ends (closed, or an error such as
// 410 Gone) or ctx is done.
func (w *statusWatch) follow(ctx context.Context, wi watch.Interface) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.expiry.C:
			w.refreshShards(ctx)
			w.print()
		case ev, ok := <-wi.ResultChan():
			l, isLease := ev.Object.(*coordinationv1.Lease)
			switch {
			case !ok || ev.Type == watch.Error || !isLease:
				return
			case ev.Type == watch.Deleted:
				w.show(ctx, nil)
			case ev.Type == watch.Added || ev.Type == watch.Modified:
				w.show(ctx, l)
			}
		}
	}
}

// show makes l the current record — observed now if its spec changed, as a
// follower's observation time — lists the candidates again if need be,
// prints it, and arms the expiry timer.
func (w *statusWatch) show(ctx context.Context, l *coordinationv1.Lease) {
	if l == nil || w.current == nil || !apiequality.Semantic.DeepEqual(l.Spec, w.current.Spec) {
		w.observedAt = time.Now()
	}
	w.current = l
	w.listCandidates(ctx)
	w.refreshShards(ctx)
	st := w.print()
	w.expiry.Stop()
	if st.Valid {
		w.expiry.Reset(time.Until(*st.Expires) + time.Millisecond)
	}
}

// refreshShards reads the shards again if they were last read
// shardsRefresh ago or longer.
func (w *statusWatch) refreshShards(ctx context.Context) {
	if time.Since(w.tableAt) >= shardsRefresh {
		w.readShards(ctx)
	}
}

func (w *statusWatch) print() leaseStatus {
	st := withShards(withCandidates(statusOf(w.ref, w.current, time.Now(), w.observedAt), w.cands, w.candsErr), w.table, w.tableErr)
	w.p.print(st)
	return st
}

// statusPrinter prints statuses as a table or as JSON. A watch's table
// (watch) is printed a row at a time, as changes come: a tabwriter, which
// aligns only what it holds when flushed, would align each row alone, so
// its columns have widths of their own (watchColumns).
type statusPrinter struct {
	w      io.Writer
	json   bool
	watch  bool
	tw     *tabwriter.Writer
	header bool
	cols   watchColumns
	// note is the candidates line a watch's table printed last, request
	// its request line ("": none), work what its work line said but the
	// seconds, which change at every renewal (workKey), shards what its
	// shards said but times (shardsKey).
	note, request, work, shards string
}

func newStatusPrinter(w io.Writer, output string, watching bool) *statusPrinter {
	return &statusPrinter{w: w, json: output == "json", watch: watching, tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
}

// statusHeader are the table's columns; a watch's has TIME first.
var statusHeader = []string{"LEASE", "STATE", "HOLDER", "TERM", "FENCE", "RENEWED", "VALID", "EXPIRES", "WORK"}

// cells are st's cells under statusHeader.
func cells(st leaseStatus) []string {
	return []string{st.Lease, st.State, holderCell(st), termCell(st), orDash(st.Fence), renewedCell(st), validCell(st), expiresCell(st), workCell(st)}
}

func (p *statusPrinter) print(st leaseStatus) {
	switch {
	case p.json:
		enc := json.NewEncoder(p.w)
		if !p.watch {
			enc.SetIndent("", "  ")
		}
		_ = enc.Encode(st)
	case p.watch:
		p.printWatchRow(st)
	default:
		fmt.Fprintln(p.tw, strings.Join(statusHeader, "\t"))
		fmt.Fprintln(p.tw, strings.Join(cells(st), "\t"))
		p.tw.Flush()
		fmt.Fprintln(p.w, candidatesNote(st))
		for _, note := range []string{handoverNote(st), workNote(st), requestNote(st)} {
			if note != "" {
				fmt.Fprintln(p.w, note)
			}
		}
		printShards(p.w, st)
		switch {
		case st.ValidityBasis == "renew-time":
			fmt.Fprintln(p.w, "* estimate: renewTime + leaseDurationSeconds against this machine's clock (assumes synchronized clocks; --watch judges as a follower does)")
		case shardsEstimated(st):
			fmt.Fprintln(p.w, shardsFootnote)
		}
	}
}

// printWatchRow prints one row of a watch's table, with the header before
// the first, the candidates line before it whenever the candidates listed
// changed, and the request line whenever the pending request changed
// ("request: none pending" once it is gone).
func (p *statusPrinter) printWatchRow(st leaseStatus) {
	if note := candidatesNote(st); candidatesKnownAs(st) != p.note {
		p.note = candidatesKnownAs(st)
		fmt.Fprintln(p.w, note)
	}
	if note := requestNote(st); note != p.request {
		p.request = note
		if note == "" {
			note = "request: none pending"
		}
		fmt.Fprintln(p.w, note)
	}
	if key := workKey(st); key != p.work {
		note := workNote(st)
		if note == "" {
			note = "work: no stuck handover in a row, nobody cooling"
		}
		if key != "" || p.work != "" {
			fmt.Fprintln(p.w, note)
		}
		p.work = key
	}
	if key := shardsKey(st); key != p.shards {
		if p.shards != "" && st.ShardTable == nil && st.ShardsError == "" {
			fmt.Fprintln(p.w, "shards: none")
		}
		printShards(p.w, st)
		if shardsEstimated(st) {
			fmt.Fprintln(p.w, shardsFootnote)
		}
		p.shards = key
		p.header = false // the header again above the next row
	}
	row := append([]string{st.Time.Format("15:04:05.000")}, cells(st)...)
	if !p.header {
		p.header = true
		p.cols.fit(row, st)
		fmt.Fprintln(p.w, p.cols.format(append([]string{"TIME"}, statusHeader...)))
	}
	p.cols.fit(row, st)
	fmt.Fprintln(p.w, p.cols.format(row))
}

// candidatesKnownAs is what the candidates line of st says but how long
// ago each registered, which changes at every row.
func candidatesKnownAs(st leaseStatus) string {
	cs := make([]candidateStatus, len(st.Candidates))
	for i, c := range st.Candidates {
		c.RenewedAt = nil
		cs[i] = c
	}
	key, _ := json.Marshal([]any{st.CandidatesKnown, st.CandidatesError, cs})
	return string(key)
}

// watchColumns are the widths of a watch's columns: each as wide as its
// widest cell so far, starting wide enough for what it usually holds (the
// longest state, a renew age in milliseconds, every candidate's identity),
// so that rows stay aligned as they come. A cell wider than its column
// widens it for the rows after it.
type watchColumns []int

// fit widens the columns for row, a status of st.
func (c *watchColumns) fit(row []string, st leaseStatus) {
	if *c == nil {
		holder := len("HOLDER")
		for _, cand := range st.Candidates {
			holder = max(holder, len(cand.Identity))
		}
		// TIME, LEASE, STATE, HOLDER, TERM, FENCE, RENEWED, VALID, EXPIRES, WORK
		*c = []int{len("15:04:05.000"), len(st.Lease), len(stateNoHolder), holder, len("TERM"), len("123456789"),
			len("59.999s ago"), len("VALID"), len("in 59.999s"), len("WORK")}
	}
	for i, cell := range row {
		(*c)[i] = max((*c)[i], len(cell))
	}
}

// format lays row out in the columns, two spaces apart.
func (c watchColumns) format(row []string) string {
	var b strings.Builder
	for i, cell := range row {
		if i == len(row)-1 {
			b.WriteString(cell)
			break
		}
		fmt.Fprintf(&b, "%-*s  ", c[i], cell)
	}
	return b.String()
}

func candidatesNote(st leaseStatus) string {
	if !st.CandidatesKnown {
		if st.CandidatesError != "" {
			return "candidates: not known (" + st.CandidatesError + ")"
		}
		return "candidates: not listed"
	}
	if len(st.Candidates) == 0 {
		return "candidates: none registered (the registry is off, or no relect candidate runs)"
	}
	var parts []string
	for _, c := range st.Candidates {
		var tags []string
		switch {
		case c.Leader:
			tags = append(tags, "leader")
		case c.Successor > 0 && c.LeftOut:
			// Not "next" without more: the line names it, but it is
			// likely gone (candidateStatus.LeftOut).
			tags = append(tags, fmt.Sprintf("named next #%d, but left out of the shards (likely gone: a takeover would wait one succession step for it)", c.Successor))
		case c.Successor > 0:
			tags = append(tags, fmt.Sprintf("next #%d", c.Successor))
		}
		if c.LeftOut && (c.Leader || c.Successor == 0) {
			tags = append(tags, "left out of the shards")
		}
		if c.Standby {
			tags = append(tags, "standby")
		}
		if c.Priority != 0 {
			tags = append(tags, fmt.Sprintf("priority %d", c.Priority))
		}
		if c.RenewedAt != nil {
			tags = append(tags, "registered "+st.Time.Sub(*c.RenewedAt).Round(time.Second).String()+" ago")
		}
		parts = append(parts, c.Identity+" ("+strings.Join(tags, ", ")+")")
	}
	return "candidates: " + strings.Join(parts, "; ")
}

// requestNote is the table's line for st's pending request, "" if none.
func requestNote(st leaseStatus) string {
	r := st.PendingRequest
	if r == nil {
		return ""
	}
	what := "yield"
	if r.Action == "handover" {
		what = "hand over to " + r.To
		if r.Unregistered {
			what += " (unregistered)"
		}
	}
	by := ""
	if r.By != "" {
		by = " by " + r.By
	}
	return fmt.Sprintf("request pending: %s, asked of %s (term %d)%s at %s", what, r.Holder, r.Term, by, r.At.Format(time.RFC3339))
}

// holderCell is the record's holder, or, for a handover, from → to.
func holderCell(st leaseStatus) string {
	if h := st.HandOver; h != nil {
		return h.From + " → " + h.To
	}
	return orDash(st.Holder)
}

// workCell sums up st.Work: the streak of stuck handovers, how many
// candidates cool; "-" when the Lease says nothing of stuck work.
func workCell(st leaseStatus) string {
	w := st.Work
	if w == nil {
		return "-"
	}
	var parts []string
	if w.Streak > 0 {
		parts = append(parts, fmt.Sprintf("streak %d", w.Streak))
	}
	if n := len(w.Cooling); n > 0 {
		parts = append(parts, fmt.Sprintf("%d cooling", n))
	}
	return strings.Join(parts, ", ")
}

// workNote is the table's line for st.Work, "" if there is none.
func workNote(st leaseStatus) string {
	w := st.Work
	if w == nil {
		return ""
	}
	var parts []string
	if w.Streak > 0 {
		s := fmt.Sprintf("%d stuck handover(s) in a row", w.Streak)
		if w.HoldUntil != nil {
			s += fmt.Sprintf(": %s holds until about %s (%s) before it may hand over for stuck work; whether its work is stuck now, its own /leader says",
				st.Holder, w.HoldUntil.UTC().Format(time.RFC3339), relative(st.Time, *w.HoldUntil))
		}
		parts = append(parts, s)
	}
	if len(w.Cooling) > 0 {
		var cs []string
		for _, c := range w.Cooling {
			cs = append(cs, fmt.Sprintf("%s (%s left)", c.Identity, age(time.Duration(c.SecondsLeft*float64(time.Second)))))
		}
		parts = append(parts, "cooling after a stuck handover, passed over in the line of succession: "+strings.Join(cs, ", "))
	}
	return "work: " + strings.Join(parts, "; ")
}

// workKey is what the work line of st says but the seconds, which change
// at every renewal: a watch prints the line again when it changes.
func workKey(st leaseStatus) string {
	w := st.Work
	if w == nil {
		return ""
	}
	ids := []string{fmt.Sprint(w.Streak), fmt.Sprint(w.HoldUntil != nil)}
	for _, c := range w.Cooling {
		ids = append(ids, c.Identity)
	}
	return strings.Join(ids, " ")
}

// handoverNote is the table's line for a handover record, "" if st is not
// one.
func handoverNote(st leaseStatus) string {
	h := st.HandOver
	if h == nil {
		return ""
	}
	if h.Until == nil {
		return fmt.Sprintf("handover: %s → %s", h.From, h.To)
	}
	if st.Valid {
		return fmt.Sprintf("handover: %s → %s until %s (%s): %s may take the lease at once, nobody leads meanwhile, then succession resumes",
			h.From, h.To, h.Until.UTC().Format(time.RFC3339Nano), relative(st.Time, *h.Until), h.To)
	}
	return fmt.Sprintf("handover: %s → %s lapsed at %s (%s): %s did not take the lease; succession resumes",
		h.From, h.To, h.Until.UTC().Format(time.RFC3339Nano), relative(st.Time, *h.Until), h.To)
}

// relative says when t is from now: "in 3s", "2s ago".
func relative(now, t time.Time) string {
	if d := t.Sub(now); d > 0 {
		return "in " + age(d)
	}
	return age(now.Sub(t)) + " ago"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func termCell(st leaseStatus) string {
	if !st.Exists {
		return "-"
	}
	return fmt.Sprint(st.Term)
}

func renewedCell(st leaseStatus) string {
	if st.RenewAgeSeconds == nil {
		return "-"
	}
	return age(time.Duration(*st.RenewAgeSeconds*float64(time.Second))) + " ago"
}

func validCell(st leaseStatus) string {
	switch {
	case st.Holder == "":
		return "-"
	case st.Valid && st.ValidityBasis == "renew-time":
		return "yes*"
	case st.Valid:
		return "yes"
	}
	return "no"
}

func expiresCell(st leaseStatus) string {
	if st.Expires == nil {
		return "-"
	}
	if d := st.Expires.Sub(st.Time); d > 0 {
		return "in " + age(d)
	}
	return age(st.Time.Sub(*st.Expires)) + " ago"
}

// age formats a duration for a table: milliseconds below a minute.
func age(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
