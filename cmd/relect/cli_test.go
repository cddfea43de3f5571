package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/relect/relect/internal/defaults"

	"github.com/relect/relect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig for a server nobody listens on (the
// tests that use it fail before any request) and returns its path.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "x"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	return path
}

// cliResult is what one command line did.
type cliResult struct {
	code           int
	stdout, stderr string
}

// runCLI runs args with a context that is already done, so that a command
// line that passes every check returns at once instead of campaigning.
func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	return runCLIWith(t, "", args...)
}

// runCLIWith is runCLI with $KUBECONFIG set to kubeconfig.
func runCLIWith(t *testing.T, kubeconfig string, args ...string) cliResult {
	t.Helper()
	t.Setenv("KUBECONFIG", kubeconfig)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	var code int
	require.NotPanics(t, func() { code = cli(ctx, args, &out, &errOut) }, "args %q", args)
	return cliResult{code: code, stdout: out.String(), stderr: errOut.String()}
}

// A $KUBECONFIG naming a missing file is named, with what else was tried
// (it gave client-go's "no configuration has been provided, try setting
// KUBERNETES_MASTER environment variable", naming no file).
func TestNoClusterSaysWhatWasTried(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "kubeconfig")
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	for _, tc := range []struct {
		name       string
		kubeconfig string // $KUBECONFIG
		want       []string
	}{
		{"$KUBECONFIG names a missing file", missing, []string{"$KUBECONFIG=" + missing, missing + " does not exist"}},
		{"$KUBECONFIG names two files", missing + string(os.PathListSeparator) + empty,
			[]string{missing + " does not exist", empty + " names no cluster"}},
		// clientcmd reads the home directory once, at init.
		{"no $KUBECONFIG, no ~/.kube/config", "", []string{"$KUBECONFIG is not set", clientcmd.RecommendedHomeFile + " does not exist"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := os.Stat(clientcmd.RecommendedHomeFile); tc.kubeconfig == "" && err == nil {
				t.Skipf("this machine has a %s", clientcmd.RecommendedHomeFile)
			}
			for _, args := range [][]string{
				{"status", "default/job"},
				{"run", "default/job", "--", "true"},
				{"sidecar", "default/job"},
			} {
				r := runCLIWith(t, tc.kubeconfig, args...)
				assert.Equal(t, exitUsage, r.code, "%q: %s", args, r.stderr)
				for _, w := range append(tc.want, "no cluster to talk to", "not in a pod", "--kubeconfig") {
					assert.Contains(t, r.stderr, w, "%q", args)
				}
				assert.NotContains(t, r.stderr, "KUBERNETES_MASTER", "%q", args)
			}
		})
	}
}

func TestBadCommandLines(t *testing.T) {
	kc := writeKubeconfig(t)
	notExec := filepath.Join(t.TempDir(), "not-executable")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644))
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer listener.Close()
	inUse := listener.Addr().String()

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // substrings of stderr
	}{
		{"no command", nil, exitUsage, []string{"Usage:"}},
		{"unknown command", []string{"elect"}, exitUsage, []string{`unknown command "elect"`}},
		{"help of an unknown command", []string{"help", "elect"}, exitUsage, []string{`unknown command "elect"`}},

		{"run: no arguments", []string{"run"}, exitUsage, []string{"missing -- before CMD"}},
		{"run: missing --", []string{"run", "default/job", "echo", "hi"}, exitUsage, []string{"missing -- before CMD"}},
		{"run: CMD flags without --", []string{"run", "default/job", "ls", "-l"}, exitUsage,
			[]string{"unknown shorthand flag: 'l'", "CMD and its arguments go after --"}},
		{"run: unknown flag", []string{"run", "--leese-duration=3s", "default/job", "--", "true"}, exitUsage,
			[]string{"unknown flag: --leese-duration", "relect run --help"}},
		{"run: missing LEASE", []string{"run", "--", "true"}, exitUsage, []string{"missing LEASE"}},
		{"run: missing CMD", []string{"run", "default/job", "--"}, exitUsage, []string{"missing CMD after --"}},
		{"run: two LEASEs", []string{"run", "default/a", "default/b", "--", "true"}, exitUsage, []string{"want one LEASE before --"}},
		{"run: LEASE without namespace", []string{"run", "job", "--", "true"}, exitUsage, []string{`LEASE "job": want NAMESPACE/NAME`}},
		{"run: LEASE with two slashes", []string{"run", "default/a/b", "--", "true"}, exitUsage, []string{`LEASE "default/a/b": want NAMESPACE/NAME`}},
		{"run: bad namespace", []string{"run", "Default/job", "--", "true"}, exitUsage, []string{`"Default" is not a valid namespace`}},
		{"run: bad name", []string{"run", "default/Job_1", "--", "true"}, exitUsage, []string{`"Job_1" is not a valid Lease name`}},
		{"run: duration not a duration", []string{"run", "--lease-duration=soon", "default/job", "--", "true"}, exitUsage,
			[]string{`invalid argument "soon" for "--lease-duration"`}},
		{"run: bad --restart", []string{"run", "--restart=sometimes", "default/job", "--", "true"}, exitUsage, []string{`--restart "sometimes"`}},
		{"run: bad --signal", []string{"run", "--signal=STOPPLEASE", "default/job", "--", "true"}, exitUsage, []string{`--signal "STOPPLEASE"`}},
		{"run: bad signal number", []string{"run", "--signal=99", "default/job", "--", "true"}, exitUsage, []string{`--signal "99"`}},
		{"run: negative --grace", []string{"run", "--grace=-1s", "default/job", "--", "true"}, exitUsage, []string{"--grace -1s is negative"}},
		{"run: --grace beyond the margin", []string{"run", "--grace=5s", "default/job", "--", "true"}, exitUsage,
			[]string{"--grace 5s is not less than --lease-duration − --renew-deadline (15s − 10s = 5s)", "raise --lease-duration"}},
		{"run: --grace beyond a custom margin", []string{"run", "--lease-duration=3s", "--renew-deadline=2s", "--grace=1s", "default/job", "--", "true"}, exitUsage,
			[]string{"--grace 1s is not less than"}},
		{"run: negative --restart-delay", []string{"run", "--restart-delay=-1s", "default/job", "--", "true"}, exitUsage, []string{"--restart-delay -1s is negative"}},
		{"run: negative --timeout", []string{"run", "--timeout=-1s", "default/job", "--", "true"}, exitUsage, []string{"--timeout -1s is negative"}},
		{"run: bad --log-format", []string{"run", "--log-format=xml", "default/job", "--", "true"}, exitUsage, []string{`--log-format "xml"`}},
		{"run: every error at once", []string{"run", "--restart=x", "--signal=y", "--grace=-1s", "default/job", "--", "true"}, exitUsage,
			[]string{`--restart "x"`, `--signal "y"`, "--grace -1s"}},
		{"run: CMD not found", []string{"run", "default/job", "--", "relect-no-such-command"}, exitNoCommand,
			[]string{`CMD "relect-no-such-command"`, "not found"}},
		{"run: CMD path not found", []string{"run", "default/job", "--", "/nonexistent/cmd"}, exitNoCommand, []string{`CMD "/nonexistent/cmd"`}},
		{"run: CMD not executable", []string{"run", "default/job", "--", notExec}, exitCannotRun, []string{"permission denied"}},
		{"run: no kubeconfig", []string{"run", "--kubeconfig=/nonexistent/kubeconfig", "default/job", "--", "true"}, exitUsage,
			[]string{"loading the kubeconfig", "/nonexistent/kubeconfig"}},
		{"run: unknown context", []string{"run", "--kubeconfig=" + kc, "--context=nope", "default/job", "--", "true"}, exitUsage,
			[]string{"loading the kubeconfig", `"nope"`}},

		// Checked by relect.New, reported in terms of the flags.
		{"run: negative duration", []string{"run", "--kubeconfig=" + kc, "--lease-duration", "-1s", "default/job", "--", "true"}, exitUsage,
			[]string{"--lease-duration is negative (-1s)"}},
		{"run: sub-second lease duration", []string{"run", "--kubeconfig=" + kc, "--lease-duration=1500ms", "--renew-deadline=1s", "default/job", "--", "true"}, exitUsage,
			[]string{"--lease-duration 1.5s is not a whole number of seconds"}},
		{"run: renew deadline beyond the lease", []string{"run", "--kubeconfig=" + kc, "--renew-deadline=20s", "default/job", "--", "true"}, exitUsage,
			[]string{"--renew-deadline 20s must be less than --lease-duration 15s"}},
		{"run: renew deadline vs retry period", []string{"run", "--kubeconfig=" + kc, "--retry-period=9s", "default/job", "--", "true"}, exitUsage,
			[]string{"--renew-deadline 10s must be greater than 1.2 × --retry-period (9s)"}},
		{"run: small burst", []string{"run", "--kubeconfig=" + kc, "--rate-burst=2", "default/job", "--", "true"}, exitUsage,
			[]string{"--rate-burst 2 is below 4"}},
		{"run: small budget", []string{"run", "--kubeconfig=" + kc, "--rate-limit=0.1", "default/job", "--", "true"}, exitUsage,
			[]string{"--rate-limit 0.1 calls/s is below"}},
		{"run: backoff max below initial", []string{"run", "--kubeconfig=" + kc, "--backoff-initial=10s", "--backoff-max=5s", "default/job", "--", "true"}, exitUsage,
			[]string{"--backoff-max 5s is less than --backoff-initial 10s"}},
		{"run: negative health option", []string{"run", "--kubeconfig=" + kc, "--cut-off-after=-1s", "default/job", "--", "true"}, exitUsage,
			[]string{"--cut-off-after is negative"}},
		{"run: bad identity", []string{"run", "--kubeconfig=" + kc, "--identity=" + strings.Repeat("x", 300), "default/job", "--", "true"}, exitUsage,
			[]string{"--identity is 300 bytes long"}},

		{"status: no LEASE", []string{"status"}, exitUsage, []string{"want one LEASE"}},
		{"status: two LEASEs", []string{"status", "default/a", "default/b"}, exitUsage, []string{"want one LEASE"}},
		{"status: bad LEASE", []string{"status", "default"}, exitUsage, []string{`LEASE "default": want NAMESPACE/NAME`}},
		{"status: bad output", []string{"status", "-o", "yaml", "default/job"}, exitUsage, []string{`--output "yaml"`}},
		{"status: bad timeout", []string{"status", "--request-timeout=0s", "default/job"}, exitUsage, []string{"--request-timeout 0s"}},
		{"status: no kubeconfig", []string{"status", "--kubeconfig=/nonexistent/kubeconfig", "default/job"}, exitUsage, []string{"loading the kubeconfig"}},

		{"sidecar: no LEASE", []string{"sidecar"}, exitUsage, []string{"want one LEASE"}},
		{"sidecar: no address", []string{"sidecar", "--http-addr=", "default/job"}, exitUsage, []string{"--http-addr is empty"}},
		{"sidecar: bad durations", []string{"sidecar", "--kubeconfig=" + kc, "--renew-deadline=1s", "default/job"}, exitUsage,
			[]string{"--renew-deadline 1s must be greater than 1.2 × --retry-period (2s)"}},
		{"sidecar: negative --valid-for", []string{"sidecar", "--valid-for=-1s", "default/job"}, exitUsage, []string{"--valid-for -1s is negative"}},
		{"sidecar: --valid-for beyond the renew deadline", []string{"sidecar", "--valid-for=11s", "default/job"}, exitUsage,
			[]string{"--valid-for 11s is longer than --renew-deadline 10s"}},
		{"sidecar: bad health option", []string{"sidecar", "--kubeconfig=" + kc, "--work-stop-timeout=-2s", "default/job"}, exitUsage,
			[]string{"--work-stop-timeout is negative"}},
		{"sidecar: --work-stop-timeout within --valid-for", []string{"sidecar", "--kubeconfig=" + kc, "--work-stop-timeout=5s", "default/job"}, exitUsage,
			[]string{"--work-stop-timeout 5s is not longer than --valid-for 10s", "/healthz would fail on every graceful handover"}},
		{"run: --work-stop-timeout within --grace", []string{"run", "--kubeconfig=" + kc, "--work-stop-timeout=2s", "default/job", "--", "true"}, exitUsage,
			[]string{"--work-stop-timeout 2s is not longer than --grace 2.5s"}},
		{"sidecar: malformed --http-addr", []string{"sidecar", "--http-addr=4040", "default/job"}, exitUsage,
			[]string{`--http-addr "4040": want HOST:PORT`}},
		{"sidecar: --http-addr port not a number", []string{"sidecar", "--http-addr=:http", "default/job"}, exitUsage,
			[]string{`--http-addr ":http": the port must be a number`}},
		{"run: malformed --http-addr", []string{"run", "--http-addr=localhost", "default/job", "--", "true"}, exitUsage,
			[]string{`--http-addr "localhost": want HOST:PORT`}},
		// Listening fails: a failure of the server, as the help says (1), not of the command line.
		{"sidecar: --http-addr not this machine's", []string{"sidecar", "--kubeconfig=" + kc, "--http-addr=256.0.0.1:1", "default/job"}, exitFailure,
			[]string{"HTTP server: --http-addr 256.0.0.1:1"}},
		{"sidecar: --http-addr in use", []string{"sidecar", "--kubeconfig=" + kc, "--http-addr=" + inUse, "default/job"}, exitFailure,
			[]string{"HTTP server: --http-addr " + inUse, "address already in use"}},
		{"run: --http-addr in use", []string{"run", "--kubeconfig=" + kc, "--http-addr=" + inUse, "default/job", "--", "true"}, exitFailure,
			[]string{"HTTP server: --http-addr " + inUse, "address already in use"}},

		// An explicit empty kubeconfig or context would silently mean the default.
		{"status: empty --kubeconfig", []string{"status", "--kubeconfig=", "default/job"}, exitUsage,
			[]string{"--kubeconfig is empty, which would mean the default ($KUBECONFIG, else ~/.kube/config"}},
		{"yield: empty --context", []string{"yield", "--kubeconfig=" + kc, "--context=", "default/job"}, exitUsage,
			[]string{"--context is empty, which would mean the default (the kubeconfig's current context)"}},

		// Work liveness: the command's own checks, then relect.New's, named as flags.
		{"run: --check and --check-url", []string{"run", "--check=true", "--check-url=http://127.0.0.1:1/", "default/job", "--", "true"}, exitUsage,
			[]string{"--check and --check-url are both given"}},
		{"run: empty --check", []string{"run", "--check=", "default/job", "--", "true"}, exitUsage, []string{"--check is empty"}},
		{"run: --check-url not http", []string{"run", "--check-url=ftp://db/", "default/job", "--", "true"}, exitUsage,
			[]string{`--check-url "ftp://db/": want an http:// or https:// URL with a host`}},
		{"sidecar: --check-url without a host", []string{"sidecar", "--check-url=http:///healthz", "default/job"}, exitUsage,
			[]string{`--check-url "http:///healthz"`}},
		{"run: --check-interval without a check", []string{"run", "--check-interval=5s", "--check-failures=2", "default/job", "--", "true"}, exitUsage,
			[]string{"--check-interval is set, but there is no work check", "--check-failures is set, but there is no work check"}},
		{"run: --work-cooldown without a check", []string{"run", "--work-cooldown=5s", "default/job", "--", "true"}, exitUsage,
			[]string{"--work-cooldown is set, but work liveness is off: give --check or --check-url\n"}},
		{"sidecar: --work-stuck-timeout without work liveness", []string{"sidecar", "--work-stuck-timeout=5m", "default/job"}, exitUsage,
			[]string{"--work-stuck-timeout is set, but work liveness is off: give --check, --check-url or --beat-window"}},
		{"run: --check-timeout beyond the interval", []string{"run", "--check=true", "--check-interval=5s", "--check-timeout=10s", "default/job", "--", "true"}, exitUsage,
			[]string{"--check-timeout 10s is longer than --check-interval 5s"}},
		{"run: negative --check-failures", []string{"run", "--check=true", "--check-failures=-1", "default/job", "--", "true"}, exitUsage,
			[]string{"--check-failures is negative (-1)"}},
		{"run: negative --check-interval", []string{"run", "--check-url=http://127.0.0.1:1/", "--check-interval=-1s", "default/job", "--", "true"}, exitUsage,
			[]string{"--check-interval is negative (-1s)"}},
		{"run: --work-max-cooldown below --work-cooldown", []string{"run", "--check=true", "--work-cooldown=1h", "--work-max-cooldown=1m", "default/job", "--", "true"}, exitUsage,
			[]string{"--work-max-cooldown 1m0s is less than --work-cooldown 1h0m0s"}},
		{"run: negative --work-stuck-timeout", []string{"run", "--check=true", "--work-stuck-timeout=-1s", "default/job", "--", "true"}, exitUsage,
			[]string{"--work-stuck-timeout is negative (-1s)"}},
		{"run: no --beat-window", []string{"run", "--beat-window=5s", "default/job", "--", "true"}, exitUsage,
			[]string{"unknown flag: --beat-window"}},
		{"sidecar: negative --beat-window", []string{"sidecar", "--beat-window=-1s", "default/job"}, exitUsage,
			[]string{"--beat-window is negative (-1s)"}},
		{"sidecar: --standby with --beat-window", []string{"sidecar", "--standby", "--beat-window=10s", "default/job"}, exitUsage,
			[]string{"work liveness (--check, --check-url or --beat-window) is set, but --standby is too"}},

		// POST /beat is served on a loopback --control-addr only, unless --expose-control.
		{"sidecar: --control-addr on every interface", []string{"sidecar", "--beat-window=10s", "--control-addr=:4041", "default/job"}, exitUsage,
			[]string{`--control-addr ":4041" is not a loopback address`, "--expose-control"}},
		{"sidecar: --control-addr on another host's address", []string{"sidecar", "--beat-window=10s", "--control-addr=10.0.0.7:4041", "default/job"}, exitUsage,
			[]string{`--control-addr "10.0.0.7:4041" is not a loopback address`}},
		{"sidecar: --expose-control of a loopback address", []string{"sidecar", "--beat-window=10s", "--expose-control", "default/job"}, exitUsage,
			[]string{"--expose-control is set, but --control-addr 127.0.0.1:4041 is a loopback address"}},
		{"sidecar: --control-addr without beats", []string{"sidecar", "--control-addr=127.0.0.1:5000", "default/job"}, exitUsage,
			[]string{"--control-addr is set, but there is nothing to serve on it"}},
		{"sidecar: malformed --control-addr", []string{"sidecar", "--beat-window=10s", "--control-addr=4041", "default/job"}, exitUsage,
			[]string{`--control-addr "4041": want HOST:PORT`}},
		{"sidecar: --control-addr in use", []string{"sidecar", "--kubeconfig=" + kc, "--http-addr=127.0.0.1:0", "--beat-window=10s", "--control-addr=" + inUse, "default/job"}, exitFailure,
			[]string{"HTTP server: --control-addr " + inUse, "address already in use"}},

		{"version: arguments", []string{"version", "x"}, exitUsage, []string{"takes no arguments"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.args...)
			assert.Equal(t, tc.code, r.code, "exit code; stderr:\n%s", r.stderr)
			for _, w := range tc.want {
				assert.Contains(t, r.stderr, w)
			}
			assert.NotContains(t, r.stderr, "Options.", "errors must name flags, not the library's fields")
			assert.NotContains(t, r.stderr, "panic")
		})
	}
}

func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"help"}, []string{"relect run", "relect status", "relect sidecar", "Exit codes"}},
		{[]string{"--help"}, []string{"relect run"}},
		{[]string{"help", "run"}, []string{"RELECT_TERM", "RELECT_IDENTITY", "RELECT_LEASE", "--grace", "Examples:", "Exit codes:", "127", "(default 15s)",
			`--restart string`, `(default "never")`, "--timeout", "124"}},
		{[]string{"run", "--help"}, []string{"--lease-duration", "--renew-deadline", "--retry-period", "--backoff-initial", "--backoff-max",
			"--rate-limit", "--rate-burst", "--degraded-after", "--keep-lease-on-cancel", "--cut-off-after", "--work-stop-timeout",
			"--signal", "--restart", "--kubeconfig", "--context", "half of that margin"}},
		{[]string{"run", "-h"}, []string{"Usage: relect run"}},
		{[]string{"status", "--help"}, []string{"--watch", "-o, --output", "estimate", "Exit codes:", "does not exist", "handover (", "Stuck work", "the WORK column"}},
		{[]string{"sidecar", "--help"}, []string{"/leader", "/healthz", "/metrics", "--file", "valid_until", "Exit codes:",
			"POST /beat", "--beat-window", "--check", "--check-url", "named in the line of succession", "work_stuck", "--work-stuck-timeout"}},
		{[]string{"run", "--help"}, []string{"--check string", "--check-url", "--check-interval", "--check-timeout", "--check-failures",
			"--work-cooldown", "--work-max-cooldown", "--work-stuck-timeout", "named in the line of succession", "not CMD itself",
			"floor(log2(T / --work-cooldown + 1)) + 1"}},
	} {
		r := runCLI(t, tc.args...)
		assert.Equal(t, exitOK, r.code, "%q", tc.args)
		for _, w := range tc.want {
			assert.Contains(t, r.stdout, w, "%q", tc.args)
		}
	}
}

// relect version and relect --version print the module version, "(devel)"
// when built from a checkout (--version was an unknown command).
func TestVersion(t *testing.T) {
	r := runCLI(t, "version")
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.True(t, strings.HasPrefix(r.stdout, "relect "), r.stdout)
	for _, args := range [][]string{{"--version"}, {"-version"}} {
		o := runCLI(t, args...)
		assert.Equal(t, exitOK, o.code, "%q: %s", args, o.stderr)
		assert.Equal(t, r.stdout, o.stdout, "%q", args)
	}
	h := runCLI(t, "version", "--help")
	assert.Equal(t, exitOK, h.code)
	assert.Contains(t, h.stdout, "Usage: relect version")

	for _, tc := range []struct {
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{nil, false, "relect (devel)"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/relect/relect", Version: "v0.1.0"}}, true,
			"relect v0.1.0 go1.26.8"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/relect/relect", Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}, true,
			"relect (devel) 0123456789ab+dirty go1.26.8"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201231000-0123456789ab"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}}}, true,
			"relect v0.0.0-20261201231000-0123456789ab go1.26.8"},
		{&debug.BuildInfo{}, true, "relect (devel)"},
	} {
		assert.Equal(t, tc.want, version(tc.info, tc.ok))
	}
}

// A command line that passes every check starts campaigning; with its
// context already done it stops at once and exits 0.
func TestGoodCommandLineStopsWhenCancelled(t *testing.T) {
	kc := writeKubeconfig(t)
	r := runCLI(t, "run", "--kubeconfig="+kc, "--lease-duration=3s", "--renew-deadline=2s", "--retry-period=500ms",
		"--grace=900ms", "--signal=INT", "--restart=never", "default/job", "--", "true", "-x", "--y")
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "campaigning")
	assert.Contains(t, r.stderr, `cmd="[true -x --y]"`)

	r = runCLI(t, "sidecar", "--kubeconfig="+kc, "--http-addr=127.0.0.1:0", "default/job")
	assert.Equal(t, exitOK, r.code, r.stderr)
	for _, args := range [][]string{
		{"--control-addr=127.0.0.1:0"}, {"--control-addr=[::1]:0"}, {"--control-addr=localhost:0"},
		{"--control-addr=:0", "--expose-control"}, // the explicit opt-in
	} {
		r = runCLI(t, append([]string{"sidecar", "--kubeconfig=" + kc, "--http-addr=127.0.0.1:0", "--beat-window=10s"}, append(args, "default/job")...)...)
		if strings.Contains(r.stderr, "cannot assign requested address") {
			continue // no IPv6 loopback here
		}
		assert.Equal(t, exitOK, r.code, "%q: %s", args, r.stderr)
	}
	assert.Contains(t, r.stderr, "not loopback (--expose-control)", "an exposed control address is warned of")
}

// An address flag with port 0 listens on a port the kernel chooses, and
// the "campaigning" line says which: it said http_addr=127.0.0.1:0 (sidecar)
// or nothing at all (run), so the port could not be found.
func TestPortZeroIsLoggedAsBound(t *testing.T) {
	kc := writeKubeconfig(t)
	for _, tc := range []struct {
		args []string
		keys []string
	}{
		{[]string{"run", "--http-addr=127.0.0.1:0", "default/job", "--", "true"}, []string{"http_addr"}},
		{[]string{"sidecar", "--http-addr=127.0.0.1:0", "--beat-window=10s", "--control-addr=127.0.0.1:0", "default/job"},
			[]string{"http_addr", "control_addr"}},
	} {
		r := runCLI(t, append([]string{tc.args[0], "--kubeconfig=" + kc}, tc.args[1:]...)...)
		require.Equal(t, exitOK, r.code, r.stderr)
		for _, key := range tc.keys {
			m := regexp.MustCompile(`msg=campaigning .*\b` + key + `=127\.0\.0\.1:([0-9]+)`).FindStringSubmatch(r.stderr)
			if assert.NotNil(t, m, "%s: %s logged: %s", tc.args[0], key, r.stderr) {
				assert.NotEqual(t, "0", m[1], "%s: %s is the port bound", tc.args[0], key)
				t.Logf("%s: %s=127.0.0.1:%s", tc.args[0], key, m[1])
			}
		}
	}
}

// /healthz must not report the command's own stop as an overrun: CMD's grace
// period (run), the wait for the validity handed out (sidecar).
func TestWorkStopTimeoutCoversTheStop(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, 10 * time.Second},
		{[]string{"--lease-duration=60s"}, 26 * time.Second},
		{[]string{"--work-stop-timeout=3s"}, 3 * time.Second},
	} {
		plan, _, err := parseRun(append(append([]string{}, tc.args...), "default/job", "--", "true"), &bytes.Buffer{})
		require.NoError(t, err)
		assert.Equal(t, tc.want, plan.s.health.WorkStopTimeout, "run %q", tc.args)
	}
	plan, _, err := parseSidecar([]string{"--renew-deadline=4s", "--lease-duration=6s", "--retry-period=1s", "default/job"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, plan.s.health.WorkStopTimeout)
	assert.Equal(t, 4*time.Second, plan.validFor, "--valid-for defaults to --renew-deadline")
	plan, _, err = parseSidecar([]string{"--valid-for=2s", "default/job"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 10*time.Second, plan.s.health.WorkStopTimeout, "at least --renew-deadline")
	assert.Equal(t, 2*time.Second, plan.validFor)
}

func TestGraceDefaultIsHalfTheMargin(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "2.5s"},
		{[]string{"--lease-duration=3s", "--renew-deadline=2s"}, "500ms"},
		{[]string{"--lease-duration=60s"}, "25s"},
		{[]string{"--grace=4s"}, "4s"},
	} {
		args := append(append([]string{}, tc.args...), "default/job", "--", "true")
		plan, _, err := parseRun(args, &bytes.Buffer{})
		require.NoError(t, err, "%q", args)
		assert.Equal(t, tc.want, plan.grace.String(), "%q", args)
	}
}

// A bad option flag is reported by name before the kubeconfig is looked
// for: on a machine with no cluster configured, the flag is still what the
// message names.
func TestBadFlagReportedBeforeTheKubeconfig(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // no ~/.kube/config either
	for _, args := range [][]string{
		{"run", "--lease-duration=-5s", "default/job", "--", "true"},
		{"sidecar", "--lease-duration=-5s", "default/job"},
	} {
		r := runCLI(t, args...)
		assert.Equal(t, exitUsage, r.code, "%q: %s", args, r.stderr)
		assert.Contains(t, r.stderr, "--lease-duration", "%q", args)
		assert.NotContains(t, r.stderr, "kubeconfig", "%q", args)
	}
}

// The work-liveness flags set the library's WorkOptions and
// HealthOptions; a check given sets Work.Check, and none leaves it off.
func TestWorkFlagsSetTheOptions(t *testing.T) {
	plan, _, err := parseRun([]string{"--check=pg_isready -h db", "--check-interval=4s", "--check-timeout=1s", "--check-failures=5",
		"--work-cooldown=30s", "--work-max-cooldown=10m", "--work-stuck-timeout=20m", "default/job", "--", "true"}, &bytes.Buffer{})
	require.NoError(t, err)
	w := plan.s.opts.Work
	assert.NotNil(t, w.Check)
	w.Check = nil
	assert.Equal(t, relect.WorkOptions{CheckInterval: 4 * time.Second, CheckTimeout: time.Second, CheckFailures: 5,
		Cooldown: 30 * time.Second, MaxCooldown: 10 * time.Minute}, w)
	assert.Equal(t, 20*time.Minute, plan.s.health.WorkStuckTimeout)
	assert.Equal(t, workCheck{command: "pg_isready -h db"}, plan.s.check)

	sc, _, err := parseSidecar([]string{"--beat-window=30s", "--check-url=https://api.internal/healthz", "default/job"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, sc.s.opts.Work.BeatWindow)
	assert.NotNil(t, sc.s.opts.Work.Check)
	assert.Equal(t, workCheck{url: "https://api.internal/healthz"}, sc.s.check)

	plan, _, err = parseRun([]string{"default/job", "--", "true"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Nil(t, plan.s.opts.Work.Check, "no check, no work liveness")
	assert.Equal(t, defaults.WorkCheckInterval, plan.s.opts.Work.CheckInterval, "the library's defaults")
	assert.Equal(t, defaults.WorkCheckFailures, plan.s.opts.Work.CheckFailures)
	assert.Equal(t, defaults.WorkCooldown, plan.s.opts.Work.Cooldown)
}
