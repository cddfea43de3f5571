package e2e

import (
	"context"
	"errors"
	"fmt"
	"github.com/relect/relect/internal/bench"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relect/relect/internal/defaults"

	"github.com/go-logr/logr"
	"github.com/relect/relect"
	"github.com/relect/relect/e2e/internal/leaseclient"
	"github.com/relect/relect/internal/clientgoloop"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// This file holds the benchmark's in-process candidates (procs): a relect
// Elector or a clientgoloop.Loop in a goroutine of the test process, whose
// Lease requests are stamped by a counting http.RoundTripper. The suite's
// candidate processes (candidate_test.go) are used where a process must die
// (SIGKILL); everything that counts requests or bytes runs in process.

// request is one Lease request a candidate's client sent.
type request struct {
	at   time.Time
	verb string // GET, WATCH, PUT (update), POST (create), ...
	// lease is the Lease named in the path ("" for a list or a watch of
	// the namespace's Leases: the registry's).
	lease string
	// forwarded: it went to the apiserver; false if the reqLog answered
	// it with an injected 500.
	forwarded bool
	// answered is when its response (a watch's: its headers) arrived,
	// with status; zero while it is in flight or if it failed.
	answered time.Time
	status   int
}

// reqLog is a counting http.RoundTripper for one candidate's clients,
// installed with rest.Config.WrapTransport: it stamps every Lease request
// when it is sent and, while fail is set, answers it with a synthesized
// HTTP 500 Status instead of sending it (fault injection at the HTTP
// level; the suite's faultproxy works at the TCP level).
type reqLog struct {
	fail       atomic.Bool
	conns      atomic.Int64 // connections its dialer opened that are not closed yet
	throttled  atomic.Int64 // responses with HTTP 429 Too Many Requests
	watchBytes atomic.Int64 // bytes of the Lease watches' response bodies read

	mu    sync.Mutex
	reqs  []request
	inner []http.RoundTripper // the transports wrapped, to close their connections
	// watchReads is when each read of a Lease watch's body returned
	// bytes: when the watch's reader took an event (or part of one) in.
	watchReads []watchRead
}

// watchRead is one read of a Lease watch's body that returned bytes.
type watchRead struct {
	at    time.Time
	lease string // the watch's Lease ("": the registry's watch)
	n     int
}

// wrap is a rest.Config.WrapTransport.
func (l *reqLog) wrap(rt http.RoundTripper) http.RoundTripper {
	l.mu.Lock()
	l.inner = append(l.inner, rt)
	l.mu.Unlock()
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if !strings.Contains(req.URL.Path, "/leases") {
			return rt.RoundTrip(req)
		}
		r := request{at: time.Now(), verb: verbOf(req), lease: leaseOf(req), forwarded: !l.fail.Load()}
		l.mu.Lock()
		i := len(l.reqs)
		l.reqs = append(l.reqs, r)
		l.mu.Unlock()
		if !r.forwarded {
			return injected500(req), nil
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		l.mu.Lock()
		l.reqs[i].answered, l.reqs[i].status = time.Now(), resp.StatusCode
		l.mu.Unlock()
		if resp.StatusCode == http.StatusTooManyRequests {
			l.throttled.Add(1)
		}
		if r.verb == "WATCH" && resp.Body != nil {
			resp.Body = &watchBody{ReadCloser: resp.Body, l: l, lease: r.lease}
		}
		return resp, nil
	})
}

// watchBody counts and stamps the reads of a Lease watch's body.
type watchBody struct {
	io.ReadCloser
	l     *reqLog
	lease string
}

func (b *watchBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.l.watchBytes.Add(int64(n))
		b.l.mu.Lock()
		b.l.watchReads = append(b.l.watchReads, watchRead{time.Now(), b.lease, n})
		b.l.mu.Unlock()
	}
	return n, err
}

// leaseOf is the Lease a request names: the path's last element after
// "leases/", or for a watch, the field selector's metadata.name; "" for
// the namespace's Leases (a list, the registry's watch).
func leaseOf(req *http.Request) string {
	if _, name, ok := strings.Cut(req.URL.Path, "/leases/"); ok {
		return name
	}
	if sel := req.URL.Query().Get("fieldSelector"); sel != "" {
		if name, ok := strings.CutPrefix(sel, "metadata.name="); ok {
			return name
		}
	}
	return ""
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// verbOf names a request as the apiserver's metrics do.
func verbOf(req *http.Request) string {
	if req.Method == http.MethodGet {
		if w := req.URL.Query().Get("watch"); w == "true" || w == "1" {
			return "WATCH"
		}
	}
	return req.Method
}

// injected500 is the answer of an apiserver whose Lease API fails: a Status
// with code 500, reason InternalError.
func injected500(req *http.Request) *http.Response {
	if req.Body != nil {
		req.Body.Close() // a RoundTripper closes the body, sent or not
	}
	const body = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
		`"message":"injected by the e2e benchmark","reason":"InternalError","code":500}`
	return &http.Response{
		Status:        "500 Internal Server Error",
		StatusCode:    http.StatusInternalServerError,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": []string{"application/json"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// all returns every request logged so far.
func (l *reqLog) all() []request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]request(nil), l.reqs...)
}

// count returns how many requests were sent in [from, to), and how many of
// them were forwarded to the apiserver.
func (l *reqLog) count(from, to time.Time) (sent, forwarded int) {
	for _, r := range l.all() {
		if !r.at.Before(from) && r.at.Before(to) {
			sent++
			if r.forwarded {
				forwarded++
			}
		}
	}
	return sent, forwarded
}

// firstSince returns the first request with this verb on lease sent at or
// after since.
func (l *reqLog) firstSince(verb, lease string, since time.Time) (request, bool) {
	for _, r := range l.all() {
		if r.verb == verb && r.lease == lease && !r.at.Before(since) {
			return r, true
		}
	}
	return request{}, false
}

// firstReadSince returns when the first read of its watch on lease at or
// after since returned bytes.
func (l *reqLog) firstReadSince(lease string, since time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.watchReads {
		if r.lease == lease && !r.at.Before(since) {
			return r.at, true
		}
	}
	return time.Time{}, false
}

// has reports whether a request with this verb was sent.
func (l *reqLog) has(verb string) bool {
	for _, r := range l.all() {
		if r.verb == verb {
			return true
		}
	}
	return false
}

// answeredSince waits until a request with this verb on lease, sent at or
// after since, has been answered 200 OK, and returns when it was.
func (l *reqLog) answeredSince(verb, lease string, since time.Time, timeout time.Duration) (time.Time, error) {
	var at time.Time
	if bench.Await(timeout, 5*time.Millisecond, func() bool {
		for _, r := range l.all() {
			if r.verb == verb && r.lease == lease && !r.at.Before(since) && r.status == http.StatusOK {
				at = r.answered
				return true
			}
		}
		return false
	}) {
		return at, nil
	}
	return time.Time{}, fmt.Errorf("no %s of %s sent since %s answered within %v", verb, lease, since.Format("15:04:05.000"), timeout)
}

// waitSince waits until a request with this verb sent at or after since
// has been logged.
func (l *reqLog) waitSince(verb string, since time.Time, timeout time.Duration) error {
	if bench.Await(timeout, 5*time.Millisecond, func() bool {
		for _, r := range l.all() {
			if r.verb == verb && !r.at.Before(since) {
				return true
			}
		}
		return false
	}) {
		return nil
	}
	return fmt.Errorf("no %s request sent since %s within %v", verb, since.Format("15:04:05.000"), timeout)
}

// closeIdle closes the idle connections of the wrapped transports, so that
// their goroutines end with the candidate, and checks that none is left:
// once the clients' calls have returned, every connection is idle soon.
// (A stream closed by the client, such as a stopped watch, may take a
// moment to leave its connection.)
func (l *reqLog) closeIdle() error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		l.mu.Lock()
		for _, rt := range l.inner {
			utilnet.CloseIdleConnectionsFor(rt)
		}
		l.mu.Unlock()
		if l.conns.Load() == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d connections still open after every call returned", l.conns.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// countedConn is a connection a reqLog's dialer opened.
type countedConn struct {
	net.Conn
	once sync.Once
	open *atomic.Int64
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.Conn.Close()
}

// restConfig returns a system:masters config, straight to the apiserver,
// whose clients log their Lease requests in l. It has a dialer of its own:
// client-go shares one transport, hence one HTTP/2 connection, between
// configs with equal TLS settings, and each candidate should reach the
// apiserver as a process of its own would, on its own connection (which
// its reqLog counts, so that closeIdle can tell that it was closed).
func (c *cluster) restConfig(l *reqLog) *rest.Config {
	return c.restConfigAs(c.adminConfig(), l)
}

// restConfigAs is restConfig with the credentials of cfg, which it
// changes and returns.
func (c *cluster) restConfigAs(cfg *rest.Config, l *reqLog) *rest.Config {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		l.conns.Add(1)
		return &countedConn{Conn: conn, open: &l.conns}, nil
	}
	cfg.WrapTransport = l.wrap
	return cfg
}

// leaseTiming is a candidate's LeaseDuration, RenewDeadline, RetryPeriod.
type leaseTiming struct{ ld, rd, rp time.Duration }

func (lt leaseTiming) String() string {
	return fmt.Sprintf("LD %v / RD %v / RP %v", lt.ld, lt.rd, lt.rp)
}

// productionTiming is relect's defaults (and Kubernetes' own components').
var productionTiming = leaseTiming{defaults.LeaseDuration, defaults.RenewDeadline, defaults.RetryPeriod}

// procOpts configure an in-process candidate.
type procOpts struct {
	mode   string // modeRelect or modeClientGo
	lease  string
	id     string
	timing leaseTiming
	// onStarted, if not nil, is called first thing in OnStartedLeading,
	// with the time it was called; onStopped, if not nil, once its
	// context is done, with that time.
	onStarted, onStopped func(p *proc, at time.Time)
	// relect's Options.BackoffMax (zero: its default) and
	// Options.DisableRegistry; the loop has neither.
	backoffMax      time.Duration
	disableRegistry bool
	// user, if not nil, holds the credentials (system:masters if nil).
	user *rest.Config
	// json: relect's Lease client speaks JSON (Options.Client, built from
	// leaseclient.JSONConfig) instead of relect's protobuf; the loop
	// speaks JSON anyway, as client-go does by default.
	json bool
}

// proc is an in-process candidate.
type proc struct {
	id, mode string
	reqs     *reqLog
	e        *relect.Elector // relect's candidate; nil for the loop
	leading  atomic.Bool     // in OnStartedLeading, its context not done
	cancel   context.CancelFunc
	done     chan struct{} // closed when Run has returned
	runErr   error         // what Run returned; read after done
}

// startProc starts an in-process candidate. Its logs, and client-go's, are
// discarded.
func (c *cluster) startProc(o procOpts) (*proc, error) {
	p := &proc{id: o.id, mode: o.mode, reqs: &reqLog{}, done: make(chan struct{})}
	cfg := c.restConfig(p.reqs)
	if o.user != nil {
		cfg = c.restConfigAs(rest.CopyConfig(o.user), p.reqs)
	}
	work := func(ctx context.Context) {
		at := time.Now()
		p.leading.Store(true)
		if o.onStarted != nil {
			o.onStarted(p, at)
		}
		<-ctx.Done()
		p.leading.Store(false)
		if o.onStopped != nil {
			o.onStopped(p, time.Now())
		}
	}
	var run func(context.Context) error
	switch o.mode {
	case modeRelect:
		opts := relect.Options{
			Config:           cfg,
			Namespace:        namespace,
			Name:             o.lease,
			Identity:         o.id,
			LeaseDuration:    o.timing.ld,
			RenewDeadline:    o.timing.rd,
			RetryPeriod:      o.timing.rp,
			BackoffMax:       o.backoffMax,
			DisableRegistry:  o.disableRegistry,
			OnStartedLeading: work,
			Logger:           slog.New(slog.DiscardHandler), // candidates log nothing
		}
		if o.json {
			cs, err := kubernetes.NewForConfig(leaseclient.JSONConfig(cfg))
			if err != nil {
				return nil, err
			}
			opts.Config, opts.Client = nil, cs
		}
		e, err := relect.New(opts)
		if err != nil {
			return nil, err
		}
		p.e, run = e, e.Run
	case modeClientGo:
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		loop, err := clientgoloop.New(clientgoloop.Config{
			Client:           cs,
			Namespace:        namespace,
			Name:             o.lease,
			Identity:         o.id,
			LeaseDuration:    o.timing.ld,
			RenewDeadline:    o.timing.rd,
			RetryPeriod:      o.timing.rp,
			OnStartedLeading: work,
		})
		if err != nil {
			return nil, err
		}
		run = func(ctx context.Context) error { loop.Run(ctx); return ctx.Err() }
	default:
		return nil, fmt.Errorf("unknown mode %q", o.mode)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	p.cancel = cancel
	go func() {
		defer close(p.done)
		p.runErr = run(ctx)
	}()
	return p, nil
}

// stop cancels the candidate's Run (relect and the loop both release a
// lease they hold), waits for it to return and closes its connections.
func (p *proc) stop() error {
	p.cancel()
	<-p.done
	var errs []error
	if p.runErr != nil && !errors.Is(p.runErr, context.Canceled) {
		errs = append(errs, fmt.Errorf("%s: Run returned %w", p.id, p.runErr))
	}
	if err := p.reqs.closeIdle(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", p.id, err))
	}
	return errors.Join(errs...)
}

// startProcs starts n candidates named prefix-0 … prefix-(n-1), in
// batches of fleetBatch, fleetBatchPause apart, as row g's fleets start.
func (c *cluster) startProcs(n int, prefix string, o procOpts) ([]*proc, error) {
	var ps []*proc
	for i := 0; i < n; i++ {
		o.id = fmt.Sprintf("%s-%d", prefix, i)
		p, err := c.startProc(o)
		if err != nil {
			stopProcs(ps)
			return nil, err
		}
		ps = append(ps, p)
		// A thousand first calls at once would be a storm of the
		// benchmark's making, in one flow of APF.
		if i%fleetBatch == fleetBatch-1 {
			time.Sleep(fleetBatchPause)
		}
	}
	return ps, nil
}

// stopProcs stops all of ps at once.
func stopProcs(ps []*proc) error {
	for _, p := range ps {
		p.cancel()
	}
	var errs []error
	for _, p := range ps {
		errs = append(errs, p.stop())
	}
	return errors.Join(errs...)
}

// leaderOf waits until one of ps leads and returns it.
func leaderOf(ps []*proc, timeout time.Duration) (*proc, error) {
	var leader *proc
	if bench.Await(timeout, 5*time.Millisecond, func() bool {
		for _, p := range ps {
			if p.leading.Load() {
				leader = p
				return true
			}
		}
		return false
	}) {
		return leader, nil
	}
	return nil, fmt.Errorf("no leader among %d candidates within %v", len(ps), timeout)
}
