package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/operator"

	"github.com/relect/relect/internal/defaults"

	"github.com/relect/relect"
	"github.com/relect/relect/internal/clientgoloop"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// The tests of relect yield and relect handover run in simulated time
// (testing/synctest) with the library's default durations (15 s / 10 s /
// 2 s), relect candidates in-process on an in-memory Lease API, and the
// command in-process as the candidate "operator".

// testElector is a relect candidate of default/job whose work waits for
// its term's end.
type testElector struct {
	*relect.Elector
	client *relecttest.Client
	stop   func() // cancels its Run and waits for it; also the test's cleanup
}

func startElector(t *testing.T, api *relecttest.LeaseAPI, id string, edit func(*relect.Options)) *testElector {
	t.Helper()
	c := api.Client(id)
	opts := relect.Options{Client: c.Clientset(), Namespace: "default", Name: "job", Identity: id,
		OnStartedLeading: func(ctx context.Context) { <-ctx.Done() }}
	if edit != nil {
		edit(&opts)
	}
	e, err := relect.New(opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return &testElector{Elector: e, client: c, stop: stop}
}

// startFleet puts a released Lease default/job and starts relect
// candidates ids, the first of which leads once the others have registered
// and the leader has listed them.
func startFleet(t *testing.T, api *relecttest.LeaseAPI, ids ...string) map[string]*testElector {
	t.Helper()
	api.PutReleased("default", "job")
	fleet := map[string]*testElector{}
	for i, id := range ids {
		fleet[id] = startElector(t, api, id, nil)
		if i == 0 {
			synctest.Wait()
			require.True(t, fleet[id].IsLeader(), "%s leads", id)
		}
	}
	time.Sleep(time.Minute)
	require.Equal(t, ids[0], api.Holder("default", "job"))
	return fleet
}

// askAs runs `relect VERB ARGS...` (VERB is args[0]) in-process as the
// candidate "operator" of api.
func askAs(t *testing.T, ctx context.Context, api *relecttest.LeaseAPI, args ...string) cliResult {
	t.Helper()
	plan, helped, err := parseRequest(args[0], args[1:], io.Discard)
	require.NoError(t, err, "%q", args)
	require.False(t, helped)
	var out, errOut bytes.Buffer
	code := ask(ctx, plan, api.Client("operator").Clientset(), &out, &errOut)
	t.Logf("relect %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
	return cliResult{code: code, stdout: out.String(), stderr: errOut.String()}
}

// pending returns the request pending in default/job, as relect status
// shows it (nil: none).
func pending(api *relecttest.LeaseAPI) *requestStatus {
	return statusOf(jobLease, api.Lease("default", "job"), time.Now(), time.Time{}).PendingRequest
}

// relect yield: the leader steps down at once, the next in line leads, and
// the command says who, exiting 0.
func TestYieldIsHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		fleet := startFleet(t, api, "a", "b")
		r := askAs(t, context.Background(), api, "yield", "--by=alice", "default/job")
		assert.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stdout, "a yielded default/job: b leads now (term 2)")
		synctest.Wait() // its term begins with the write after the acquiring one
		assert.True(t, fleet["b"].IsLeader())
		assert.False(t, fleet["a"].IsLeader())
		assert.Nil(t, pending(api), "the release removed the request")
	})
}

// relect handover: the leader hands over to the candidate named, even one
// that is not first in line, and the command exits 0 once it leads; a
// handover to the holder itself has nothing to do.
func TestHandOverIsHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		fleet := startFleet(t, api, "a", "b", "c")
		require.Equal(t, "b", fleet["a"].Candidates()[1].Identity, "b is first in line")
		r := askAs(t, context.Background(), api, "handover", "--by=alice", "default/job", "c")
		assert.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stdout, "a handed default/job over to c: c leads now (term 2)")
		synctest.Wait() // its term begins with the write after the acquiring one
		assert.True(t, fleet["c"].IsLeader())

		r = askAs(t, context.Background(), api, "handover", "default/job", "c")
		assert.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stdout, "c holds default/job already")
		assert.True(t, fleet["c"].IsLeader())
	})
}

// relect handover checks IDENTITY against the candidate registry: a name
// nobody registered (a typo) or a standby is refused with exit 4, saying
// what is registered, and nothing is written; --unregistered lets an
// unregistered name through, never a standby.
func TestHandOverChecksTheIdentity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		fleet := startFleet(t, api, "a", "b")
		startElector(t, api, "s", func(o *relect.Options) { o.Standby = true })
		time.Sleep(time.Minute)
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"handover", "default/job", "bb"}, `"bb" is not a registered candidate of default/job: it has no registration; registered: a (leader), b, s (standby). ` +
				`A relect candidate registers 1 to 3 s after it starts (half a --retry-period to 1.5 of it), so if bb has just started, it is not registered yet: try again`},
			{[]string{"handover", "default/job", "s"}, `"s" stands by (--standby) and never leads`},
			{[]string{"handover", "--unregistered", "default/job", "s"}, `"s" stands by`},
		} {
			r := askAs(t, context.Background(), api, tc.args...)
			assert.Equal(t, exitRefused, r.code, "%q: %s", tc.args, r.stderr)
			assert.Contains(t, r.stderr, tc.want, "%q", tc.args)
		}
		assert.Contains(t, askAs(t, context.Background(), api, "handover", "default/job", "bb").stderr, "pass --unregistered")
		assert.NotContains(t, api.Lease("default", "job").Annotations, "relect.io/request", "nothing was written")
		assert.True(t, fleet["a"].IsLeader())
	})
}

// A handover that passes relect's check can still be refused by the
// leader, which knows better who is live: a candidate that died without
// deregistering (its registration lapsed, and stays listed until the
// leader deletes it). The leader leads on, reports the refusal once, and
// its next renewal removes the request; the command sees the request gone
// while the same term goes on and exits 4.
func TestHandOverRefusedByTheLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		fleet := startFleet(t, api, "a")
		ghost := startElector(t, api, "ghost", func(o *relect.Options) { o.RegistrationRenewal = 15 * time.Second })
		time.Sleep(5 * time.Second) // registered
		ghost.client.Partition()    // it dies cut off: its registration stays
		ghost.stop()
		// Its registration lives 3 × RegistrationRenewal (45 s) on the
		// leader's clock, and is deleted after twice that.
		time.Sleep(50 * time.Second)
		cands, err := operator.ListCandidates(context.Background(), api.Client("operator").Clientset(), "default", "job")
		require.NoError(t, err)
		require.Len(t, cands, 2, "ghost is still listed")

		events := fleet["a"].Events()
		r := askAs(t, context.Background(), api, "handover", "--by=mallory", "default/job", "ghost")
		assert.Equal(t, exitRefused, r.code, r.stderr)
		assert.Contains(t, r.stderr, "refused: a still leads default/job (term 1), and the request is gone")
		assert.True(t, fleet["a"].IsLeader())
		assert.Equal(t, "a", api.Holder("default", "job"))
		assert.Nil(t, pending(api))
		refusals := 0
		for len(events) > 0 {
			if ev := <-events; ev.Kind == relect.EventError && errors.Is(ev.Err, relect.ErrUnknownCandidate) {
				refusals++
				assert.ErrorContains(t, ev.Err, "mallory")
			}
		}
		assert.Equal(t, 1, refusals, "the leader reported the refusal once")
	})
}

// A request written otherwise than by relect handover (kubectl, or the
// library's RequestHandOver), naming an identity nobody registered, is
// shown pending by relect status, refused by the leader, and gone at its
// next renewal: the leader leads on.
func TestForgedHandOverIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		fleet := startFleet(t, api, "a", "b")
		watched := &lockedBuffer{}
		stopWatch := watchTable(t, api, watched)
		r, err := operator.RequestHandOver(context.Background(), api.Client("mallory").Clientset(), "default", "job", "nobody", "mallory", nil)
		require.NoError(t, err)
		require.Equal(t, "a", r.Holder)
		time.Sleep(3 * time.Second) // a renews within a retry period
		synctest.Wait()
		assert.True(t, fleet["a"].IsLeader())
		assert.Equal(t, "a", api.Holder("default", "job"))
		assert.Nil(t, pending(api), "the renewal removed it")
		stopWatch()
		out := watched.b.String()
		assert.Contains(t, out, "request pending: hand over to nobody, asked of a (term 1) by mallory at ")
		assert.Contains(t, out, "request: none pending")
	})
}

// watchTable runs relect status --watch on default/job as a table into
// out, until the returned stop is called.
func watchTable(t *testing.T, api *relecttest.LeaseAPI, out io.Writer) (stop func()) {
	t.Helper()
	cs := api.Client("status").Clientset()
	list := func(ctx context.Context) ([]relect.Candidate, error) {
		return operator.ListCandidates(ctx, cs, "default", "job")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- watchStatus(ctx, cs.CoordinationV1().Leases("default"), list, nil, jobLease, time.Second, newStatusPrinter(out, "table", true), io.Discard)
	}()
	synctest.Wait()
	return func() {
		cancel()
		require.NoError(t, <-done)
	}
}

// A handover to a candidate outside the registry (--unregistered) that
// never takes the Lease: the leader honours it, the handover record lapses
// after twice the retry period, the next in line leads, and the command
// says so, exiting 5.
func TestHandOverTakenByAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		fleet := startFleet(t, api, "a", "b")
		r := askAs(t, context.Background(), api, "handover", "--unregistered", "default/job", "elsewhere")
		assert.Equal(t, exitOtherLeads, r.code, r.stderr)
		assert.Contains(t, r.stderr, "a stepped down, but b leads default/job now (term 2), not elsewhere")
		synctest.Wait() // its term begins with the write after the acquiring one
		assert.True(t, fleet["b"].IsLeader())
	})
}

// Nobody to ask: a missing Lease, a released one. Exit 3, and nothing is
// written.
func TestRequestWithoutLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		for _, verb := range [][]string{{"yield"}, {"handover", "--unregistered"}} {
			args := append(verb, "default/job")
			if verb[0] == "handover" {
				args = append(args, "b")
			}
			r := askAs(t, context.Background(), api, args...)
			assert.Equal(t, exitNoLeader, r.code, "%q: %s", args, r.stderr)
			assert.Contains(t, r.stderr, "no leader to ask: Lease default/job does not exist")

			api.PutReleased("default", "job")
			r = askAs(t, context.Background(), api, args...)
			assert.Equal(t, exitNoLeader, r.code, "%q: %s", args, r.stderr)
			assert.Contains(t, r.stderr, "no leader to ask: Lease default/job is not held")
			assert.Empty(t, api.Lease("default", "job").Annotations)
			require.NoError(t, api.Delete("default", "job"))
		}
	})
}

// A plain client-go leader ignores requests: relect yield gives up after
// --timeout (exit 124), saying so, and relect status shows the request
// pending for as long as that leader's term lasts. Once another leader
// takes the Lease, the request is stale: status shows none, and the new
// (relect) leader ignores it. The wait also ends on a stop signal, and
// when the Lease is deleted.
func TestRequestIgnoredByAClientGoLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased("default", "job")
		cg := startClientGo(t, api, "cg")
		synctest.Wait()
		require.Equal(t, "cg", api.Holder("default", "job"))

		r := askAs(t, context.Background(), api, "yield", "--by=alice", "--timeout=10s", "default/job")
		assert.Equal(t, exitTimedOut, r.code, r.stderr)
		assert.Contains(t, r.stderr, "no outcome within --timeout 10s: cg still leads default/job (term 1) and has not acted on the request")
		assert.Contains(t, r.stderr, "a plain client-go leader ignores requests")
		assert.Contains(t, r.stderr, "the request was withdrawn")
		time.Sleep(time.Minute)
		assert.Nil(t, pending(api), "withdrawn: it does not linger while cg's term lasts")

		// Left pending with --no-wait, it stays while cg's term lasts: its
		// renewals keep the annotation.
		r = askAs(t, context.Background(), api, "yield", "--by=alice", "--no-wait", "default/job")
		assert.Equal(t, exitOK, r.code, r.stderr)
		time.Sleep(time.Minute)
		req := pending(api)
		require.NotNil(t, req, "pending while cg's term lasts")
		assert.Equal(t, requestStatus{Action: "yield", Request: operator.Request{Holder: "cg", Term: 1, By: "alice", At: req.At}}, *req)

		// A stop signal while waiting (for a handover this time).
		ctx, stop := context.WithCancelCause(context.Background())
		time.AfterFunc(time.Second, func() { stop(errors.New("stop signal: interrupt")) })
		r = askAs(t, ctx, api, "handover", "--unregistered", "default/job", "x")
		assert.Equal(t, exitTimedOut, r.code, r.stderr)
		assert.Contains(t, r.stderr, "stopped waiting (stop signal: interrupt): cg still leads")

		// The Lease deleted while waiting.
		time.AfterFunc(time.Second, func() { _ = api.Delete("default", "job") })
		r = askAs(t, context.Background(), api, "yield", "default/job")
		assert.Equal(t, exitFailure, r.code, r.stderr)
		assert.Contains(t, r.stderr, "Lease default/job was deleted while waiting for the outcome")
		time.Sleep(time.Minute) // cg takes the Lease again
		synctest.Wait()
		require.Equal(t, "cg", api.Holder("default", "job"))

		// Stale once the term has ended.
		_, err := operator.RequestYield(context.Background(), api.Client("operator").Clientset(), "default", "job", "alice")
		require.NoError(t, err)
		require.NotNil(t, pending(api))
		r1 := startElector(t, api, "r1", nil)
		time.Sleep(time.Minute)
		cg.stop() // releases; r1 takes the Lease at once
		synctest.Wait()
		require.True(t, r1.IsLeader())
		assert.Nil(t, pending(api), "stale: addressed to an earlier holder")
		term := api.Lease("default", "job").Spec.LeaseTransitions
		time.Sleep(time.Minute)
		assert.True(t, r1.IsLeader(), "a stale request changes nothing")
		assert.Equal(t, *term, *api.Lease("default", "job").Spec.LeaseTransitions)
	})
}

// clientGoLeader is a plain client-go candidate (the loop every comparison
// runs) of default/job.
type clientGoLeader struct {
	stop func() // releases the lease (ReleaseOnCancel) and waits for Run
}

func startClientGo(t *testing.T, api *relecttest.LeaseAPI, id string) *clientGoLeader {
	t.Helper()
	loop, err := clientgoloop.New(clientgoloop.Config{
		Client: api.Client(id).Clientset(), Namespace: "default", Name: "job", Identity: id,
		LeaseDuration: defaults.LeaseDuration, RenewDeadline: defaults.RenewDeadline, RetryPeriod: defaults.RetryPeriod,
		OnStartedLeading: func(ctx context.Context) { <-ctx.Done() },
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); loop.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return &clientGoLeader{stop: stop}
}

// --no-wait returns once the request is written; the leader honours it
// all the same.
func TestRequestNoWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		fleet := startFleet(t, api, "a", "b")
		api.Client("operator").FailVerb(relecttest.VerbWatch, relecttest.Error(403)) // not needed
		r := askAs(t, context.Background(), api, "yield", "--no-wait", "default/job")
		assert.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stdout, "asked a to yield default/job; not waiting for the outcome")
		synctest.Wait()
		assert.True(t, fleet["b"].IsLeader())
	})
}

// An API that refuses: exit 1, naming the RBAC the command needs.
func TestRequestForbidden(t *testing.T) {
	for _, tc := range []struct {
		verb string
		args []string
		want string
	}{
		{relecttest.VerbGet, []string{"yield", "default/job"}, "needs RBAC get on leases"},
		{relecttest.VerbUpdate, []string{"yield", "default/job"}, "needs RBAC get and update on leases"},
		{relecttest.VerbWatch, []string{"yield", "default/job"}, "needs RBAC watch on leases; or pass --no-wait"},
		{relecttest.VerbList, []string{"handover", "default/job", "b"}, "needs RBAC list on leases; --unregistered skips the check"},
	} {
		t.Run(tc.verb, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := relecttest.NewLeaseAPI()
				fleet := startFleet(t, api, "a", "b")
				api.Client("operator").FailVerb(tc.verb, relecttest.Error(403))
				r := askAs(t, context.Background(), api, tc.args...)
				assert.Equal(t, exitFailure, r.code, r.stderr)
				assert.Contains(t, r.stderr, tc.want)
				assert.True(t, fleet["a"].IsLeader())
			})
		})
	}
}

// The outcome is judged against the term the request was addressed to,
// from the record that carries it: every way the records that follow can
// go.
func TestJudge(t *testing.T) {
	at := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	rec := func(holder string, transitions int32, acquired time.Time, req string) *coordinationv1.Lease {
		l := lease(holder, 15, transitions, acquired.Add(time.Minute)) // acquired a minute before renewed
		if req != "" {
			l.Annotations = map[string]string{"relect.io/request": req}
		}
		return l
	}
	yield := `{"holder":"a","term":4,"by":"alice","at":"2026-01-02T15:04:05Z"}`
	handover := `{"holder":"a","term":4,"to":"c","by":"alice","at":"2026-01-02T15:04:05Z"}`
	other := `{"holder":"a","term":4,"to":"c","by":"bob","at":"2026-01-02T15:04:05Z"}`
	later := at.Add(time.Hour)
	for _, tc := range []struct {
		name    string
		to      string
		records []*coordinationv1.Lease // after the one that carries the request; nil: deleted
		code    int                     // -1: no outcome yet
		want    string
	}{
		{"yield: still pending", "", []*coordinationv1.Lease{rec("a", 4, at, yield)}, -1, ""},
		{"yield: released, then b", "", []*coordinationv1.Lease{rec("", 4, later, ""), rec("b", 5, later, "")}, exitOK, "a yielded default/job: b leads now (term 5)"},
		{"yield: released only", "", []*coordinationv1.Lease{rec("", 4, later, "")}, -1, ""},
		{"yield: a again, a new term", "", []*coordinationv1.Lease{rec("", 4, later, ""), rec("a", 4, later, "")}, exitOK, "a leads again"},
		{"yield: removed", "", []*coordinationv1.Lease{rec("a", 4, at, "")}, exitRefused, "refused: a still leads default/job (term 4)"},
		{"handover: the handover record", "c", []*coordinationv1.Lease{rec("c", 4, later, "")}, -1, ""},
		{"handover: c leads", "c", []*coordinationv1.Lease{rec("c", 4, later, ""), rec("c", 5, later, "")}, exitOK, "a handed default/job over to c: c leads now (term 5)"},
		{"handover: b leads", "c", []*coordinationv1.Lease{rec("c", 4, later, ""), rec("", 4, later, ""), rec("b", 5, later, "")}, exitOtherLeads,
			"a stepped down, but b leads default/job now (term 5), not c"},
		{"handover: refused", "c", []*coordinationv1.Lease{rec("a", 4, at, "")}, exitRefused, "a relect leader refuses a handover"},
		{"handover: replaced", "c", []*coordinationv1.Lease{rec("a", 4, at, other)}, exitRefused, `another request (by "bob", to hand over to c) replaced this one`},
		{"deleted", "", []*coordinationv1.Lease{nil}, exitFailure, "Lease default/job was deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := yield
			if tc.to != "" {
				req = handover
			}
			j := &judge{a: asked{holder: "a", to: tc.to, by: "alice", sent: time.Now()}, lease: jobLease}
			_, done := j.observe(rec("a", 4, at, "")) // before the write
			require.False(t, done)
			_, done = j.observe(rec("a", 4, at, req)) // the write
			require.False(t, done)
			o, done := outcome{}, false
			for _, r := range tc.records {
				if o, done = j.observe(r); done {
					break
				}
			}
			if tc.code < 0 {
				assert.False(t, done, "%+v", o)
				return
			}
			require.True(t, done)
			assert.Equal(t, tc.code, o.code, o.msg)
			assert.Contains(t, o.msg, tc.want)
		})
	}
}

// Every bad command line exits 2, naming the argument or flag; help
// lists every flag, examples, exit codes and the RBAC needed.
func TestRequestHelpAndBadLines(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"yield"}, "want one LEASE (NAMESPACE/NAME), got 0 arguments"},
		{[]string{"yield", "default/a", "b"}, "want one LEASE (NAMESPACE/NAME), got 2 arguments"},
		{[]string{"yield", "default"}, `LEASE "default": want NAMESPACE/NAME`},
		{[]string{"yield", "--timeout=0s", "default/job"}, "--timeout 0s: want a positive duration (to not wait, pass --no-wait)"},
		{[]string{"yield", "--timeout=-1s", "default/job"}, "--timeout -1s"},
		{[]string{"yield", "--unregistered", "default/job"}, "unknown flag: --unregistered"},
		{[]string{"handover", "default/job"}, "want LEASE (NAMESPACE/NAME) and IDENTITY, got 1 arguments"},
		{[]string{"handover", "default/job", " "}, "IDENTITY is empty"},
		{[]string{"handover", "Default/job", "b"}, `"Default" is not a valid namespace`},
		{[]string{"handover", "--kubeconfig=/nonexistent/kubeconfig", "default/job", "b"}, "loading the kubeconfig"},
	} {
		r := runCLI(t, tc.args...)
		assert.Equal(t, exitUsage, r.code, "%q: %s", tc.args, r.stderr)
		assert.Contains(t, r.stderr, tc.want, "%q", tc.args)
		assert.Contains(t, r.stderr, "--help", "%q", tc.args)
	}
	for _, args := range [][]string{{"help", "yield"}, {"handover", "--help"}} {
		r := runCLI(t, args...)
		assert.Equal(t, exitOK, r.code, "%q", args)
		for _, w := range []string{"--by", "--no-wait", "--timeout", "(default 30s)", "Exit codes:", "124", "RBAC", "get and update", "watch", "Examples:"} {
			assert.Contains(t, r.stdout, w, "%q", args)
		}
	}
	assert.Contains(t, runCLI(t, "handover", "--help").stdout, "--unregistered")
	assert.Contains(t, runCLI(t, "handover", "--help").stdout, "list (for\nthe check")
	assert.NotContains(t, runCLI(t, "yield", "--help").stdout, "--unregistered")
	assert.True(t, strings.Contains(runCLI(t, "help").stdout, "relect handover"))
}

// A watch that ends (closed by the apiserver, or 410 Gone) does not end
// the wait: the Lease is read again, judged, and watched from there.
func TestWaitResyncsWhenTheWatchEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		fleet := startFleet(t, api, "a", "b")
		ctx := context.Background()
		op := api.Client("operator").Clientset()
		leases := op.CoordinationV1().Leases("default")
		plan, _, err := parseRequest("yield", []string{"--by=alice", "default/job"}, io.Discard)
		require.NoError(t, err)
		pre, err := leases.Get(ctx, "job", metav1.GetOptions{})
		require.NoError(t, err)
		ended := watch.NewFake()
		ended.Stop() // its result channel is closed
		w := &outcomeWatch{leases: leases, plan: plan, pre: pre, wi: ended}
		defer w.stop()
		sent := time.Now()
		r, err := operator.RequestYield(ctx, op, "default", "job", "alice")
		require.NoError(t, err)
		o := w.wait(ctx, asked{holder: r.Holder, by: "alice", sent: sent})
		assert.Equal(t, exitOK, o.code, o.msg)
		assert.Contains(t, o.msg, "a yielded default/job: b leads now")
		synctest.Wait()
		assert.True(t, fleet["b"].IsLeader())
	})
}
