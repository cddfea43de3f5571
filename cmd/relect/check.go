package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/relect/relect"
	"github.com/spf13/pflag"
)

// Work liveness (relect.Options.Work) from the command line: a work check
// — a shell command or an HTTP URL — that the library runs while this
// candidate leads and while it is named in the line of succession, and
// (sidecar) the program's beats. The flags are the tables workFlags and
// beatFlags (flags.go).

// workCheck is the work check the flags give: a shell command (--check) or
// an HTTP URL (--check-url), at most one. The zero value is none.
type workCheck struct {
	command string // --check: run with sh -c; healthy when it exits 0
	url     string // --check-url: GET; healthy on a 2xx answer
}

// configured reports whether a check was given.
func (c workCheck) configured() bool { return c.command != "" || c.url != "" }

// Flags that mean something only with a work check, and only with work
// liveness at all (a check, or --beat-window).
var (
	checkOnlyFlags = []string{"check-interval", "check-timeout", "check-failures"}
	workOnlyFlags  = []string{"work-cooldown", "work-max-cooldown", "work-stuck-timeout"}
)

// resolveWork checks the work-liveness flags of fs as far as the library
// does not — one check at most, a URL relect can GET, no flag that would do
// nothing — and sets a stand-in Options.Work.Check when a check is given,
// so that relect.New checks the check's flags too (runElection and
// sidecarElection set the real one, whose environment names the identity).
// It returns every problem found.
func (s *settings) resolveWork(fs *pflag.FlagSet) []error {
	var errs []error
	c := s.check
	switch {
	case fs.Changed("check") && c.command == "":
		errs = append(errs, usagef("--check is empty: want a shell command, healthy when it exits 0"))
	case c.command != "" && c.url != "":
		errs = append(errs, usagef("--check and --check-url are both given: a candidate has one work check"))
	}
	if fs.Changed("check-url") {
		if err := checkURL(c.url); err != nil {
			errs = append(errs, err)
		}
	}
	beats := fs.Lookup("beat-window") != nil
	for _, name := range checkOnlyFlags {
		if fs.Changed(name) && !c.configured() {
			errs = append(errs, usagef("--%s is set, but there is no work check to apply it to: give --check or --check-url", name))
		}
	}
	if !c.configured() && s.opts.Work.BeatWindow == 0 {
		want := "--check or --check-url"
		if beats {
			want = "--check, --check-url or --beat-window"
		}
		for _, name := range workOnlyFlags {
			if fs.Changed(name) {
				errs = append(errs, usagef("--%s is set, but work liveness is off: give %s", name, want))
			}
		}
	}
	if iv := s.opts.Work.CheckInterval; c.configured() && iv > 0 && iv < minCheckInterval {
		errs = append(errs, usagef("--check-interval %v is below %v: checks back to back cost a core and fill the log, and judge stuck work no better", iv, minCheckInterval))
	}
	if c.configured() {
		s.opts.Work.Check = func(context.Context) error { return nil } // a stand-in, for relect.New to check the flags
	}
	return errs
}

// minCheckInterval is the shortest --check-interval: each check starts a
// shell or opens a connection, and its failures are logged (-v), so a
// check every few microseconds (--check-interval=1ns was accepted) ran
// back to back and the log dropped records; stuck work is judged over
// --check-failures checks anyway. 100 ms still lets a test or a demo judge
// stuck work within a second (the command's own tests use it).
const minCheckInterval = 100 * time.Millisecond

// checkURL checks the form of --check-url: http or https, with a host.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--check-url %q: want an http:// or https:// URL with a host, e.g. http://127.0.0.1:8080/healthz", raw)
	}
	return nil
}

// checker runs one configured workCheck: its run method is
// relect.WorkOptions.Check. setEnv must be called before the Elector runs;
// from then on run is safe for concurrent use.
type checker struct {
	workCheck
	// env is the command's environment: relect's, with RELECT_IDENTITY
	// and RELECT_LEASE (and with shards, per check, RELECT_SHARD).
	env    []string
	client *http.Client
}

// newChecker returns the checker of c, or nil if c is not configured.
func newChecker(c workCheck) *checker {
	if !c.configured() {
		return nil
	}
	// No keep-alive: a check every few seconds gains nothing from one, and
	// no idle connection (with its goroutines) outlives a call.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	return &checker{workCheck: c, client: &http.Client{Transport: tr}}
}

// setEnv gives the command its environment, for candidate identity of
// lease. It does nothing on a nil checker.
func (c *checker) setEnv(identity string, lease leaseRef) {
	if c != nil {
		c.env = append(os.Environ(), "RELECT_IDENTITY="+identity, "RELECT_LEASE="+lease.String())
	}
}

// install makes c the work check of opts: each shard's with shards,
// else the election's. It does nothing on a nil checker.
func (c *checker) install(opts *relect.Options, shards bool) {
	switch {
	case c != nil && shards:
		opts.Shards.Work.Check = c.run
	case c != nil:
		opts.Work.Check = c.run
	}
}

// run checks once: nil when healthy, else an error that says why, with
// the last line the command printed or the start of the answer's body.
// It returns by the time ctx is done, having killed the command (and its
// process group) if it still ran.
func (c *checker) run(ctx context.Context) error {
	if c.url != "" {
		return c.get(ctx)
	}
	return c.runCommand(ctx)
}

// checkWaitDelay is how long, after the check command exits or is killed,
// relect waits for its output to close (a process it started may hold
// it) before it gives up on the rest.
const checkWaitDelay = time.Second

func (c *checker) runCommand(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, "sh", "-c", c.command)
	cmd.Env = c.env
	if shard, ok := relect.ShardFromContext(ctx); ok {
		cmd.Env = append(slices.Clip(c.env), "RELECT_SHARD="+shard) // a check per shard held
	}
	out := &tailBuffer{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = out, out // stdin: the null device
	cmd.WaitDelay = checkWaitDelay
	inOwnGroup(cmd)
	// The parent-death signal fires when the thread that forked the check
	// exits (as for CMD, startProc): stay on it until the check is reaped.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	err := cmd.Run()
	killRest(cmd)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("--check: killed after %v: it did not exit within the check's timeout (--check-timeout)",
			time.Since(start).Round(time.Millisecond))
	case errors.As(err, &exit):
		if line := lastLine(out.Bytes()); line != "" {
			return fmt.Errorf("--check: %v: %s", exit, line)
		}
		return fmt.Errorf("--check: %v", exit)
	}
	return fmt.Errorf("--check: %w", err)
}

func (c *checker) get(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return fmt.Errorf("--check-url: %w", err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("--check-url: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	msg := fmt.Sprintf("--check-url: GET %s: %s", c.url, resp.Status)
	if line := firstLine(body); line != "" {
		msg += ": " + line
	}
	return errors.New(msg)
}

// tailBuffer keeps the last max bytes written to it. It is not safe for
// concurrent use: os/exec writes a command's stdout and stderr, when they
// are one writer, from one goroutine.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) Bytes() []byte { return t.b }

// maxReported is the longest line of a check's output an error quotes.
const maxReported = 200

func lastLine(b []byte) string {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return shorten(string(bytes.TrimSpace(b)))
}

func firstLine(b []byte) string {
	b = bytes.TrimSpace(b)
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	return shorten(string(bytes.TrimSpace(b)))
}

func shorten(s string) string {
	if len(s) <= maxReported {
		return s
	}
	return strings.ToValidUTF8(s[:maxReported], "") + "…"
}
