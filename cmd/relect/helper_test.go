package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
)

// helperEnv names the environment variable that makes the test binary a
// helper process instead of running tests (TestMain); helperPIDFile names
// the file the helper writes its CMD's pid to.
const (
	helperEnv     = "RELECT_CMD_TEST_HELPER"
	helperPIDFile = "RELECT_CMD_TEST_PIDFILE"
)

// helperProcess is the test binary started as a stand-in for relect:
// "start-and-block" starts "sleep 300" the way relect run starts CMD,
// writes its pid to $RELECT_CMD_TEST_PIDFILE and blocks until killed;
// "check-and-block" runs a --check command that writes its pid there and
// hangs, the way relect runs checks.
func helperProcess(mode string) int {
	switch mode {
	case "check-and-block":
		return checkAndBlock()
	case "start-and-block":
	default:
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		return 2
	}
	p, err := startProc([]string{"sleep", "300"}, os.Environ(), io.Discard, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := writeAtomic(os.Getenv(helperPIDFile), []byte(strconv.Itoa(p.pid))); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	<-p.done // never, unless sleep is killed
	return 0
}

// checkAndBlock runs a check command that writes its own pid (exec keeps
// it: the pid is the check's) and then hangs, with no timeout, until the
// helper is killed.
func checkAndBlock() int {
	c := newChecker(workCheck{command: "echo $$ > " + os.Getenv(helperPIDFile) + ".tmp && mv " + os.Getenv(helperPIDFile) + ".tmp " + os.Getenv(helperPIDFile) + " && exec sleep 300"})
	err := c.run(context.Background())
	fmt.Fprintln(os.Stderr, "the check returned:", err)
	return 1
}
