package main

import (
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// zeroCase is what an explicit zero of one flag does.
type zeroCase struct {
	zero string   // the zero value as written: "0", "0s", ""
	with []string // the flags it needs to mean anything (a check, beats)
	// refused: the zero would mean the default, and is refused naming the
	// flag; otherwise want is a substring of the error ("" none: the zero
	// is a value of its own, accepted).
	refused bool
	want    string
}

// zeroCases say, for every flag of run and sidecar, what its zero does. A
// flag missing here fails the test: each new flag must be audited.
var zeroCases = map[string]zeroCase{
	// Parsed as given; an empty --kubeconfig or --context is refused when
	// the client is built (cluster.go; TestBadCommandLines).
	"kubeconfig": {zero: ""},
	"context":    {zero: ""},

	"identity":             {zero: "", refused: true},
	"lease-duration":       {zero: "0s", refused: true},
	"renew-deadline":       {zero: "0s", refused: true},
	"retry-period":         {zero: "0s", refused: true},
	"backoff-initial":      {zero: "0s", refused: true},
	"backoff-max":          {zero: "0s", refused: true},
	"rate-limit":           {zero: "0", refused: true},
	"rate-burst":           {zero: "0", refused: true},
	"degraded-after":       {zero: "0", refused: true},
	"keep-lease-on-cancel": {zero: "false"},
	"priority":             {zero: "0"}, // a rank
	"disable-registry":     {zero: "false"},
	"registration-renewal": {zero: "0s", refused: true},

	"check":              {zero: "", want: "--check is empty"},
	"check-url":          {zero: "", want: `--check-url ""`},
	"check-interval":     {zero: "0s", with: []string{"--check=true"}, refused: true},
	"check-timeout":      {zero: "0s", with: []string{"--check=true"}, refused: true},
	"check-failures":     {zero: "0", with: []string{"--check=true"}, refused: true},
	"work-cooldown":      {zero: "0s", with: []string{"--check=true"}, refused: true},
	"work-max-cooldown":  {zero: "0s", with: []string{"--check=true"}, refused: true},
	"cut-off-after":      {zero: "0s", refused: true},
	"work-stop-timeout":  {zero: "0s", refused: true},
	"work-stuck-timeout": {zero: "0s", with: []string{"--check=true"}, refused: true},
	"log-format":         {zero: "", want: `--log-format ""`},
	"verbose":            {zero: "false"},

	// run
	"signal":        {zero: "0", want: `--signal "0": no such signal number`},
	"grace":         {zero: "0s", refused: true},
	"restart":       {zero: "", want: `--restart ""`},
	"restart-delay": {zero: "0s"}, // again at once
	"timeout":       {zero: "0s"}, // never gives up, as the help says
	"http-addr":     {zero: ""},   // run: none (sidecar: below)

	// sidecar
	"standby":        {zero: "false"},
	"file":           {zero: ""}, // none
	"valid-for":      {zero: "0s", refused: true},
	"beat-window":    {zero: "0s"}, // no beats expected, as the help says
	"control-addr":   {zero: "", with: []string{"--beat-window=10s"}, want: "--control-addr is empty"},
	"expose-control": {zero: "false"},

	// run and sidecar: shards
	"shards":           {zero: "0"}, // no shards, as the help says
	"shard-names":      {zero: "", want: "--shard-names is empty"},
	"shard-ranges":     {zero: "", with: []string{"--shards=2"}}, // plain shards, as the help says
	"shard-weight":     {zero: "0", with: []string{"--shards=2"}, refused: true},
	"shard-join-delay": {zero: "0s", with: []string{"--shards=2"}, refused: true},
}

// flagNames returns the flags a command's help lists.
func flagNames(t *testing.T, command string) []string {
	t.Helper()
	r := runCLI(t, command, "--help")
	require.Equal(t, exitOK, r.code)
	_, flags, _ := strings.Cut(r.stdout, "\nFlags:\n")
	flags, _, _ = strings.Cut(flags, "\nExamples:")
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^ {1,6}(?:-\w, )?--([a-z-]+)\b`).FindAllStringSubmatch(flags, -1) {
		names = append(names, m[1])
	}
	require.NotEmpty(t, names)
	return names
}

// An explicit zero that the library would take for its default is refused
// naming the flag (--work-cooldown=0s became one minute, --check-failures=0
// three, --lease-duration=0s 15 s, silently); a zero that is a value of its
// own is accepted; every flag of run and sidecar is one or the other, and
// a flag left out still means the default.
func TestZeroFlags(t *testing.T) {
	parse := map[string]func(args []string) error{
		"run": func(args []string) error {
			_, _, err := parseRun(append(args, "default/job", "--", "true"), io.Discard)
			return err
		},
		"sidecar": func(args []string) error {
			_, _, err := parseSidecar(append(args, "default/job"), io.Discard)
			return err
		},
	}
	for _, command := range []string{"run", "sidecar"} {
		for _, name := range flagNames(t, command) {
			t.Run(command+" --"+name, func(t *testing.T) {
				tc, ok := zeroCases[name]
				require.True(t, ok, "--%s: say in zeroCases what its zero does", name)
				if command == "sidecar" && name == "http-addr" {
					tc = zeroCase{zero: "", want: "--http-addr is empty"}
				}
				err := parse[command](append(append([]string{}, tc.with...), "--"+name+"="+tc.zero))
				switch {
				case tc.refused:
					require.Error(t, err)
					assert.Contains(t, err.Error(), "--"+name+" is ")
					assert.Contains(t, err.Error(), "which would mean the default")
					assert.Contains(t, err.Error(), "leave the flag out for the default")
				case tc.want != "":
					require.Error(t, err)
					assert.Contains(t, err.Error(), tc.want)
				default:
					assert.NoError(t, err)
				}
				if err != nil {
					assert.NotContains(t, err.Error(), "panic")
				}
				assert.NoError(t, parse[command](tc.with), "the flag left out means the default")
			})
		}
	}
}

// --check-interval has a floor of 100 ms: --check-interval=1ns was
// accepted, the check ran back to back and the log filled with "log
// records dropped" lines.
func TestCheckIntervalFloor(t *testing.T) {
	for _, tc := range []struct {
		interval string
		want     string // "" accepted
	}{
		{"1ns", "--check-interval 1ns is below 100ms"},
		{"99ms", "--check-interval 99ms is below 100ms"},
		{"100ms", ""},
		{"10s", ""},
	} {
		_, _, err := parseRun([]string{"--check=true", "--check-interval=" + tc.interval, "default/job", "--", "true"}, io.Discard)
		if tc.want == "" {
			assert.NoError(t, err, tc.interval)
			continue
		}
		require.Error(t, err, tc.interval)
		assert.Contains(t, err.Error(), tc.want)
	}
}
