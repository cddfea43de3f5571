package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/relect/relect/operator"

	"github.com/relect/relect"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// relect yield and relect handover: an operator's request to the current
// leader (operator.RequestYield, operator.RequestHandOver), and the wait for
// its outcome (requestwait.go).

const yieldHead = `Usage: relect yield [flags] NAMESPACE/NAME

Asks the current leader of the Lease NAMESPACE/NAME to step down, from any
machine with RBAC on the Lease — to drain its node, say. It writes a
request into the Lease (annotation relect.io/request) addressed to the
holder and its term. A relect leader (relect run, relect sidecar, or a
program built on the library) honours it at once, as its Yield: its work is
stopped, the Lease released, and the next candidate in line takes it; the
one that yielded stays a candidate. Then relect watches the Lease, for up
to --timeout, and says what happened:

  yielded     the holder stepped down; relect prints who leads now, or
              that nobody does yet (exit 0)
  refused     the request vanished while the same holder still leads in
              the same term (exit 4): another request replaced it, or the
              leader does not know requests
  no outcome  --timeout passed with the request still pending (exit 124),
              and relect withdraws it: a plain client-go leader ignores
              requests (its renewals keep the annotation); a relect leader
              acts at once, unless it cannot reach the API

A request cannot make two leaders: it can only end a term, and stepping
down is always safe. One addressed to an earlier holder or term is stale
and ignored by everyone (relect status does not show it). A request left
pending (--no-wait, or no outcome) is honoured if its holder sees it within
the same term, and ignored by every later term.

Needs RBAC on leases in the Lease's namespace: get and update, and watch
(unless --no-wait).
`

const yieldTail = `Examples:
  # Before draining the leader's node:
  relect yield kube-system/my-controller

  # Ask, and do not wait for the outcome (see it with relect status):
  relect yield --no-wait --by="alice, ticket OPS-123" default/nightly-backup

Exit codes:
  0    the holder stepped down (or, with --no-wait, the request was written)
  1    relect failed: the Lease could not be read, written or watched (the
       message names the RBAC missing), or it was deleted while waiting
  2    bad command line or kubeconfig (the message names the flag)
  3    no leader to ask: the Lease is missing, released, or being handed
       over
  4    refused: the request vanished while the same holder still leads
  124  no outcome within --timeout, or the wait was stopped by SIGTERM or
       SIGINT: the request may still be pending (relect status shows it)
`

const handoverHead = `Usage: relect handover [flags] NAMESPACE/NAME IDENTITY

Asks the current leader of the Lease NAMESPACE/NAME to hand it over to the
candidate IDENTITY, from any machine with RBAC on the Lease. It writes a
request into the Lease (annotation relect.io/request) addressed to the
holder and its term. A relect leader (relect run, relect sidecar, or a
program built on the library) honours it at once, as its HandOver: its work
is stopped, and it writes the Lease naming IDENTITY as holder for twice its
--retry-period, in which only IDENTITY may take it; the leader stays a
candidate. Then relect watches the Lease, for up to --timeout, and says what
happened:

  handed over  IDENTITY leads (exit 0)
  refused      the request vanished while the same holder still leads in
               the same term (exit 4): the leader does not know IDENTITY
               as a live registered candidate (its log says why), or
               another request replaced this one
  other leads  the leader stepped down, but another candidate took the
               Lease (exit 5): IDENTITY did not take it in time
  no outcome   --timeout passed (exit 124), and relect withdraws the
               request if it is still pending (a plain client-go leader
               ignores requests), or IDENTITY has not taken the Lease yet

IDENTITY must be a registered candidate of the Lease that may lead: relect
lists the candidate registry first (as relect status does) and refuses
another, saying which are registered (exit 4); the leader then checks
IDENTITY against the live candidates it knows. --unregistered hands over to
a candidate outside the registry (a plain client-go candidate, or a relect
one with --disable-registry): neither check is made then, except that a
candidate known to stand by (--standby) is always refused.

A request cannot make two leaders: it can only end a term, and the handover
record names a single holder. One addressed to an earlier holder or term
is stale and ignored by everyone (relect status does not show it). A
request left pending (--no-wait, or no outcome) is honoured if its holder
sees it within the same term, and ignored by every later term.

Needs RBAC on leases in the Lease's namespace: get and update, list (for
the check; not with --unregistered), and watch (unless --no-wait).
`

const handoverTail = `Examples:
  # Move the leader off a node before draining it, to a chosen candidate:
  relect handover kube-system/my-controller my-controller-7d9f-x2x

  # To a plain client-go candidate, which is not in the registry:
  relect handover --unregistered kube-system/my-controller old-controller-0

  # Ask, and do not wait for the outcome (see it with relect status):
  relect handover --no-wait default/nightly-backup backup-1

Exit codes:
  0    IDENTITY leads (or, with --no-wait, the request was written; or
       IDENTITY held the Lease already)
  1    relect failed: the Lease could not be read, written, listed or
       watched (the message names the RBAC missing), or it was deleted
       while waiting
  2    bad command line or kubeconfig (the message names the flag)
  3    no leader to ask: the Lease is missing, released, or being handed
       over
  4    refused: IDENTITY is not a registered candidate that may lead, or
       the request vanished while the same holder still leads
  5    the leader stepped down, but another candidate than IDENTITY leads
  124  no outcome within --timeout, or the wait was stopped by SIGTERM or
       SIGINT: the request may still be pending (relect status shows it)
`

// Exit codes of yield and handover, beyond those of every command and
// exitTimedOut (124, as run --timeout).
const (
	// exitNoLeader: nobody to ask. Status's exitNotFound, a Lease with
	// nobody in it, has the same number.
	exitNoLeader = 3
	// exitRefused: the request was refused, by relect's own check of
	// IDENTITY or by the leader.
	exitRefused = 4
	// exitOtherLeads: the leader handed over, but another candidate than
	// the one named took the Lease.
	exitOtherLeads = 5
)

// requestPlan is a checked yield or handover command line.
type requestPlan struct {
	verb         string // "yield" or "handover"
	cluster      clusterFlags
	lease        leaseRef
	to           string // handover's IDENTITY; "" for a yield
	by           string
	unregistered bool
	noWait       bool
	timeout      time.Duration // of the whole command: check, write and wait
}

func yieldCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return requestCommand(ctx, "yield", args, stdout, stderr)
}

func handoverCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return requestCommand(ctx, "handover", args, stdout, stderr)
}

func requestCommand(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) int {
	plan, helped, err := parseRequest(verb, args, stdout)
	if helped {
		return exitOK
	}
	if err != nil {
		return report(stderr, verb, err)
	}
	cfg, err := plan.cluster.restConfig()
	if err != nil {
		return report(stderr, verb, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return report(stderr, verb, err)
	}
	return ask(ctx, plan, cs, stdout, stderr)
}

func parseRequest(verb string, args []string, stdout io.Writer) (_ *requestPlan, helped bool, _ error) {
	p := &requestPlan{verb: verb}
	fs := newFlagSet(verb)
	p.cluster.define(fs)
	fs.StringVar(&p.by, "by", "", "who asks, for people: shown by relect status and in the leader's log (default: the OS user name)")
	if verb == "handover" {
		fs.BoolVar(&p.unregistered, "unregistered", false,
			"hand over to IDENTITY even if it is not in the candidate registry (a plain client-go candidate, or relect with --disable-registry); a standby is still refused")
	}
	fs.BoolVar(&p.noWait, "no-wait", false, "return once the request is written, without waiting for its outcome (watch not needed)")
	fs.DurationVar(&p.timeout, "timeout", 30*time.Second,
		"how long relect may take in all: its check, the write and the wait for the outcome (with --no-wait: the write); more than 0")
	head, tail, want := yieldHead, yieldTail, "one LEASE (NAMESPACE/NAME)"
	if verb == "handover" {
		head, tail, want = handoverHead, handoverTail, "LEASE (NAMESPACE/NAME) and IDENTITY"
	}
	helped, err := parseFlags(fs, args, head, tail, stdout)
	if helped || err != nil {
		return nil, helped, err
	}
	if !fs.Changed("by") {
		p.by = osUser()
	}
	var errs []string
	n := 1
	if verb == "handover" {
		n = 2
	}
	if fs.NArg() != n {
		errs = append(errs, fmt.Sprintf("want %s, got %d arguments: %q", want, fs.NArg(), fs.Args()))
	}
	if fs.NArg() >= 1 {
		lease, err := parseLease(fs.Arg(0))
		if err != nil {
			errs = append(errs, err.Error())
		}
		p.lease = lease
	}
	if verb == "handover" && fs.NArg() >= 2 {
		if p.to = fs.Arg(1); strings.TrimSpace(p.to) == "" {
			errs = append(errs, "IDENTITY is empty: name the candidate to hand over to (relect status lists them)")
		}
	}
	if p.timeout <= 0 {
		errs = append(errs, fmt.Sprintf("--timeout %v: want a positive duration (to not wait, pass --no-wait)", p.timeout))
	}
	if len(errs) > 0 {
		return nil, false, usagef("%s", strings.Join(errs, "\n"))
	}
	return p, false, nil
}

// osUser is --by's default: the user name, else $USER, else empty.
func osUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

// ask makes the request of plan with client and, unless --no-wait, waits
// for its outcome; it returns the exit code.
func ask(ctx context.Context, plan *requestPlan, client kubernetes.Interface, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, plan.timeout)
	defer cancel()
	leases := client.CoordinationV1().Leases(plan.lease.namespace)
	pre, code := readLeader(ctx, plan, leases, stdout, stderr)
	if pre == nil {
		return code
	}
	if plan.to != "" {
		if code := checkCandidate(ctx, plan, client, stderr); code != exitOK {
			return code
		}
	}
	// Watch from the version read, before the request is written: the
	// record that carries it, and every change after it, are seen.
	var w *outcomeWatch
	if !plan.noWait {
		var err error
		if w, err = startOutcomeWatch(ctx, leases, plan, pre); err != nil {
			return fail(stderr, plan, "watching Lease %s (needs RBAC watch on leases; or pass --no-wait): %w", plan.lease, err)
		}
		defer w.stop()
	}
	sent := time.Now()
	r, err := write(ctx, plan, client)
	holder := r.Holder
	switch {
	case errors.Is(err, operator.ErrNoLeader):
		fmt.Fprintf(stderr, "relect %s: no leader to ask: %s\n", plan.verb, strings.TrimPrefix(err.Error(), operator.ErrNoLeader.Error()+": "))
		return exitNoLeader
	case err != nil:
		return fail(stderr, plan, "writing the request into Lease %s (needs RBAC get and update on leases): %w", plan.lease, err)
	case plan.noWait:
		fmt.Fprintf(stdout, "asked %s to %s %s; not waiting for the outcome (relect status %s shows the request while it is pending)\n",
			holder, plan.action(), plan.lease, plan.lease)
		return exitOK
	}
	o := w.wait(ctx, asked{holder: holder, to: plan.to, unregistered: plan.unregistered, by: plan.by, sent: sent})
	if o.code == exitTimedOut {
		o.msg += withdraw(ctx, plan, client, r)
	}
	if o.code == exitOK {
		fmt.Fprintln(stdout, o.msg)
	} else {
		fmt.Fprintf(stderr, "relect %s: %s\n", plan.verb, o.msg)
	}
	return o.code
}

// readLeader reads the Lease before the request. It returns it, or nil
// and the exit code after saying why there is nothing to ask: no Lease, no
// holder, or (handover) IDENTITY holds it already (exit 0). The library's
// write checks again, with what it reads.
func readLeader(ctx context.Context, plan *requestPlan, leases coordinationv1client.LeaseInterface, stdout, stderr io.Writer) (*coordinationv1.Lease, int) {
	l, err := leases.Get(ctx, plan.lease.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		fmt.Fprintf(stderr, "relect %s: no leader to ask: Lease %s does not exist\n", plan.verb, plan.lease)
		return nil, exitNoLeader
	case err != nil:
		return nil, fail(stderr, plan, "reading Lease %s (needs RBAC get on leases): %w", plan.lease, err)
	}
	switch holder := ptrValue(l.Spec.HolderIdentity); {
	case holder == "":
		fmt.Fprintf(stderr, "relect %s: no leader to ask: Lease %s is not held\n", plan.verb, plan.lease)
		return nil, exitNoLeader
	case holder == plan.to:
		fmt.Fprintf(stdout, "%s holds %s already (term %d): nothing to do\n", plan.to, plan.lease, ptrValue(l.Spec.LeaseTransitions))
		return nil, exitOK
	}
	return l, exitOK
}

// action says what the request asks, for messages: "yield", "hand over to x".
func (p *requestPlan) action() string {
	if p.to == "" {
		return "yield"
	}
	return fmt.Sprintf("hand over to %s", p.to)
}

// write writes the request and returns it.
func write(ctx context.Context, plan *requestPlan, client kubernetes.Interface) (operator.Request, error) {
	ns, name := plan.lease.namespace, plan.lease.name
	if plan.to == "" {
		return operator.RequestYield(ctx, client, ns, name, plan.by)
	}
	return operator.RequestHandOver(ctx, client, ns, name, plan.to, plan.by, &relect.HandOverOptions{Unregistered: plan.unregistered})
}

// withdraw takes back request r after a wait without an outcome, so that
// it does not linger in the Lease (operator.WithdrawRequest: only while it
// is still the same request), and says what became of it.
func withdraw(ctx context.Context, plan *requestPlan, client kubernetes.Interface, r operator.Request) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	removed, err := operator.WithdrawRequest(ctx, client, plan.lease.namespace, plan.lease.name, r)
	switch {
	case err != nil:
		return fmt.Sprintf("; withdrawing the request failed (%v): it stays until the term ends", err)
	case removed:
		return "; the request was withdrawn"
	}
	return "; the request is gone already"
}

// checkCandidate checks handover's IDENTITY against the candidate registry
// (operator.ListCandidates): a registered candidate that may lead, or with
// --unregistered anyone but a known standby (then a failed list is no
// reason to stop). It returns exitOK, or the exit code after saying why.
func checkCandidate(ctx context.Context, plan *requestPlan, client kubernetes.Interface, stderr io.Writer) int {
	cands, err := operator.ListCandidates(ctx, client, plan.lease.namespace, plan.lease.name)
	if err != nil {
		if plan.unregistered {
			return exitOK
		}
		return fail(stderr, plan, "listing the candidates of %s to check %q (needs RBAC list on leases; --unregistered skips the check): %w",
			plan.lease, plan.to, err)
	}
	for _, c := range cands {
		if c.Identity == plan.to && c.Standby {
			fmt.Fprintf(stderr, "relect handover: refused: %q stands by (--standby) and never leads; registered: %s\n", plan.to, registered(cands))
			return exitRefused
		}
		if c.Identity == plan.to {
			return exitOK
		}
	}
	if plan.unregistered {
		return exitOK
	}
	fmt.Fprintf(stderr, "relect handover: refused: %q is not a registered candidate of %s: it has no registration; registered: %s. "+
		"A relect candidate registers 1 to 3 s after it starts (half a --retry-period to 1.5 of it), so if %s has just started, "+
		"it is not registered yet: try again in a few seconds. One that stopped has deregistered. "+
		"A plain client-go candidate, or a relect one with --disable-registry, never registers: pass --unregistered to hand over to it\n",
		plan.to, plan.lease, registered(cands), plan.to)
	return exitRefused
}

// registered lists cands for a message: "a (leader), b, s (standby)".
func registered(cands []relect.Candidate) string {
	if len(cands) == 0 {
		return "none (the registry is off, or no relect candidate runs)"
	}
	var parts []string
	for _, c := range cands {
		var tags []string
		if c.Leader {
			tags = append(tags, "leader")
		}
		if c.Standby {
			tags = append(tags, "standby")
		}
		if len(tags) == 0 {
			parts = append(parts, c.Identity)
		} else {
			parts = append(parts, c.Identity+" ("+strings.Join(tags, ", ")+")")
		}
	}
	return strings.Join(parts, ", ")
}

// fail reports an API failure (exit 1).
func fail(stderr io.Writer, plan *requestPlan, format string, args ...any) int {
	return report(stderr, plan.verb, fmt.Errorf(format, args...))
}

// leaseTerm is what identifies a term in a Lease record: its holder, its
// number (leaseTransitions) and its acquireTime, which tells a candidate's
// new term from its old one when both have the same number.
type leaseTerm struct {
	holder   string
	number   int32
	acquired time.Time
}

func termOf(l *coordinationv1.Lease) leaseTerm {
	t := leaseTerm{holder: ptrValue(l.Spec.HolderIdentity), number: ptrValue(l.Spec.LeaseTransitions)}
	if l.Spec.AcquireTime != nil {
		t.acquired = l.Spec.AcquireTime.Time
	}
	return t
}
