// Command worker is the CMD that the e2e tests give relect run. It appends
// one JSON line per event to a log shared by every worker of a test
// (O_APPEND, one write per line, so lines never interleave and their order
// in the file is the order they were written):
//
//	{"kind":"start","pid":…,"id":…,"term":…,"t":…,"overlap":false}
//	{"kind":"stop",…}   on the stop signal, just before exiting 0
//	{"kind":"exit",…}   before exiting by itself (-exit-after)
//
// The kernel checks the safety property: at start every worker takes an
// exclusive flock on one lock file shared by all, and holds it until it
// dies. A worker that finds it held — another worker is still alive —
// records overlap=true (then waits for it). Each worker also holds a lock
// on a file named after its pid, so that the test can tell the moment it
// died, whoever reaps it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Line is one line of the log.
type Line struct {
	Kind    string `json:"kind"`
	PID     int    `json:"pid"`
	ID      string `json:"id"`   // RELECT_IDENTITY
	Term    string `json:"term"` // RELECT_TERM
	Lease   string `json:"lease"`
	T       int64  `json:"t"` // Unix nanoseconds
	Overlap bool   `json:"overlap,omitempty"`
	Code    int    `json:"code,omitempty"`
}

func main() {
	logPath := flag.String("log", "", "shared log file")
	lockPath := flag.String("lock", "", "shared lock file")
	pidDir := flag.String("pid-dir", "", "directory for the per-pid lock file")
	onTerm := flag.String("on-term", "exit", "on SIGTERM or SIGINT: exit (write a stop line, exit 0) or ignore")
	exitAfter := flag.Duration("exit-after", 0, "exit by itself after this long (0: never)")
	exitCode := flag.Int("exit-code", 0, "status of that exit")
	flag.Parse()

	logf, err := os.OpenFile(*logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	check(err)
	line := func(kind string, overlap bool, code int) {
		b, err := json.Marshal(Line{Kind: kind, PID: os.Getpid(), ID: os.Getenv("RELECT_IDENTITY"),
			Term: os.Getenv("RELECT_TERM"), Lease: os.Getenv("RELECT_LEASE"), T: time.Now().UnixNano(),
			Overlap: overlap, Code: code})
		check(err)
		_, err = logf.Write(append(b, '\n'))
		check(err)
	}

	// Signals first, so that none arrives unhandled once we run.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	own := lockFile(filepath.Join(*pidDir, strconv.Itoa(os.Getpid())+".lock"))
	defer own.Close()
	shared, err := os.OpenFile(*lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	check(err)
	defer shared.Close()
	overlap := false
	if err := syscall.Flock(int(shared.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		overlap = true
		line("start", true, 0)
		check(syscall.Flock(int(shared.Fd()), syscall.LOCK_EX))
	}
	if !overlap {
		line("start", false, 0)
	}

	var exit <-chan time.Time
	if *exitAfter > 0 {
		exit = time.After(*exitAfter)
	}
	for {
		select {
		case <-sigs:
			if *onTerm == "ignore" {
				continue
			}
			line("stop", false, 0)
			os.Exit(0)
		case <-exit:
			line("exit", false, *exitCode)
			os.Exit(*exitCode)
		}
	}
}

// lockFile creates path and holds an exclusive flock on it until the
// process dies.
func lockFile(path string) *os.File {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	check(err)
	check(syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	return f
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(99)
	}
}
