package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/relect/relect"
	"github.com/relect/relect/metrics"
	"k8s.io/client-go/rest"
)

// newElector builds the Elector for opts (with its connection and
// callbacks set) and checks health as /healthz will use it. Invalid options
// are reported as a usage error naming the flags.
func newElector(opts relect.Options, health relect.HealthOptions) (*relect.Elector, error) {
	e, err := relect.New(opts)
	if errors.Is(err, relect.ErrInvalidOptions) {
		return nil, optionsError(err, electionFlags, standbyFlags, workFlags, beatFlags, shardFlags)
	}
	if err != nil {
		return nil, err
	}
	// A HealthCheck with invalid options fails every check with an error
	// that says so; before Run the check otherwise passes.
	if err := e.HealthCheck(health)(nil); errors.Is(err, relect.ErrInvalidOptions) {
		return nil, optionsError(err, healthFlags)
	}
	return e, nil
}

// checkOptions validates the options the flags set, as newElector will,
// before the kubeconfig is loaded: a bad flag is reported by name even on a
// machine where no cluster can be found. The Elector it builds never runs.
func checkOptions(s settings, lease leaseRef) error {
	opts := s.opts
	opts.Config = &rest.Config{Host: "https://127.0.0.1"} // only validated, never called
	opts.Namespace, opts.Name = lease.namespace, lease.name
	opts.OnStartedLeading = func(context.Context) {}
	_, err := newElector(opts, s.health)
	return err
}

// httpServer is one listener of the command's HTTP endpoints (startHTTP,
// startControl).
type httpServer struct {
	srv    *http.Server
	served chan struct{}
	// addr is the address bound, HOST:PORT: the port chosen by the kernel
	// for a flag's port 0, the one to log.
	addr string
}

// errHTTP wraps a failure of an HTTP server: to listen, or after it
// started. It is a failure while running (exit 1), not a usage error.
var errHTTP = errors.New("HTTP server")

// checkAddr checks the form of an address flag (--http-addr,
// --control-addr): HOST:PORT or :PORT, with a port number. A malformed one
// is a usage error (exit 2); one that cannot be listened on — in use, not
// this machine's, not allowed — is known only when the server listens, and
// is a failure of the server (exit 1).
func checkAddr(flag, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("--%s %q: want HOST:PORT or :PORT, e.g. :4040", flag, addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return usagef("--%s %q: the port must be a number from 0 to 65535", flag, addr)
	}
	return nil
}

// checkHTTPAddr checks --http-addr (checkAddr).
func checkHTTPAddr(addr string) error { return checkAddr("http-addr", addr) }

// isLoopbackHost reports whether host, of a HOST:PORT, names only this
// machine's loopback: "localhost" or a loopback IP. "" (every interface)
// is not.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// startHTTP listens on addr (--http-addr) at once, so that an address that
// cannot be listened on fails before the campaign (errHTTP), and serves the
// read-only endpoints until stop: GET /leader (JSON), /shards (JSON, the
// shards held; 404 without shards, shards nil), /healthz (relect's
// health check) and /metrics (relect's metrics, on a registry of its own).
// They are for the kubelet's probes, Prometheus and other pods, on the pod
// IP. Nothing served here changes the election: POST /beat, which keeps a
// leader leading, is served on the control address only (startControl);
// here it is refused with 404 and where it is (beatsAt: the control
// address, or "" when no beats are expected). If serving fails later, it
// calls fail with the error.
func startHTTP(addr string, e *relect.Elector, view *leaderView, shards *shardView, health relect.HealthOptions, beatsAt string, fail func(error)) (*httpServer, error) {
	collector, err := metrics.NewCollector(e, metrics.Options{})
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(collector); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /leader", func(w http.ResponseWriter, _ *http.Request) {
		writeState(w, http.StatusOK, view.state())
	})
	mux.Handle("GET /shards", handleShards(shards))
	mux.Handle("GET /healthz", e.HealthHandler(health))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	refusal := "relect: no beats are expected here (relect sidecar serves POST /beat with --beat-window, on --control-addr only)\n"
	if beatsAt != "" {
		refusal = "relect: POST /beat is served on --control-addr " + beatsAt + " only, not on --http-addr " + addr + "\n"
	}
	mux.HandleFunc("POST /beat", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, refusal, http.StatusNotFound)
	})
	return serve("http-addr", addr, mux, false, fail)
}

// startControl listens on addr (--control-addr) at once and serves the
// endpoints that change the election's course until stop: POST /beat, the
// program's work made progress (--beat-window). Its answer is the state
// after it: 200 when it counted, 409 Conflict when this candidate does not
// lead. A beat is not authenticated, and whoever can send one can keep a
// leader whose work is stuck leading: unless exposed (--expose-control),
// the address must be loopback — 127.0.0.1 or ::1, which the kernel lets
// only this network namespace (the pod's containers) reach — and is
// checked again once bound, so that a host name resolving elsewhere fails
// (errHTTP).
func startControl(addr string, view *leaderView, exposed bool, fail func(error)) (*httpServer, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /beat", func(w http.ResponseWriter, _ *http.Request) {
		st, counted := view.beat()
		code := http.StatusOK
		if !counted {
			code = http.StatusConflict
		}
		writeState(w, code, st)
	})
	return serve("control-addr", addr, mux, !exposed, fail)
}

// serve listens on addr, the value of --flag, refusing an address bound to
// anything but loopback if loopbackOnly, and serves h until stop.
func serve(flag, addr string, h http.Handler, loopbackOnly bool, fail func(error)) (*httpServer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: --%s %s: %v", errHTTP, flag, addr, err)
	}
	if tcp, ok := l.Addr().(*net.TCPAddr); loopbackOnly && (!ok || !tcp.IP.IsLoopback()) {
		l.Close()
		return nil, fmt.Errorf("%w: --%s %s: bound to %v, not a loopback address", errHTTP, flag, addr, l.Addr())
	}
	s := &httpServer{
		srv:    &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second},
		served: make(chan struct{}),
		addr:   l.Addr().String(),
	}
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			fail(fmt.Errorf("%w: %v", errHTTP, err))
		}
	}()
	return s, nil
}

// writeState answers with st as JSON, never cached.
func writeState(w http.ResponseWriter, code int, st leaderState) { writeJSON(w, code, st) }

// writeJSON answers with v as JSON, never cached.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// stop shuts the server down, waiting up to 5 s for requests in flight,
// and returns when it has stopped serving.
func (s *httpServer) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	<-s.served
}

// pump shows the events of one Run to view (the library logs them) until
// Run closes the channel. With a file it also rewrites the file whenever the state
// changes: after each event, when a term's work begins or ends (view's
// signal), and every tick (renewals extend the validity without an
// event).
func pump(events <-chan relect.Event, log *slog.Logger, view *leaderView, file *stateFile, tick time.Duration) {
	var ticks <-chan time.Time
	if file != nil {
		t := time.NewTicker(tick)
		defer t.Stop()
		ticks = t.C
	}
	var warned fileWarnings
	for {
		open := true
		select {
		case ev, ok := <-events:
			if open = ok; ok {
				view.observe(ev)
			}
		case <-view.changed:
		case <-ticks:
		}
		if file != nil {
			warned.report(log, file.write(view.state()))
		}
		if !open {
			return
		}
	}
}

// fileWarnings keeps the state file's failures from flooding the log: a
// file rewritten every few milliseconds whose directory is gone fails
// each time. A failure is warned of when it differs from the last one, or
// a minute after the last warning, with the count of those not warned of
// since; the first write that succeeds after failures says so, with their
// count.
type fileWarnings struct {
	last     string    // the last failure, "" after a success
	warnedAt time.Time // when a failure was last warned of
	unwarned int       // failures since that warning, not warned of
	failures int       // failures since the last success
}

// fileWarnEvery is how often one failure of the state file is warned of
// again while it lasts.
const fileWarnEvery = time.Minute

func (w *fileWarnings) report(log *slog.Logger, err error) {
	switch {
	case err == nil && w.failures > 0:
		log.Info("the state file is written again", "failures", w.failures)
		*w = fileWarnings{}
	case err == nil:
	case err.Error() != w.last || time.Since(w.warnedAt) >= fileWarnEvery:
		w.failures++
		log.Warn("writing the state file", "err", err, "not_warned_of_since", w.unwarned)
		w.last, w.warnedAt, w.unwarned = err.Error(), time.Now(), 0
	default:
		w.failures++
		w.unwarned++
	}
}
