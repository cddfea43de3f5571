package e2e

import (
	"syscall"
	"testing"
	"time"
)

// defaultGrace is relect run's default grace period with the suite's
// timings: half of LeaseDuration − RenewDeadline.
func defaultGrace() time.Duration { return (leaseDuration - renewDeadline) / 2 }

// runArgs are the arguments of `relect run` for candidate id on lease, with
// the workers' CMD given these flags.
func runArgs(t *testing.T, w *workers, id, lease string, relectFlags []string, workerFlags ...string) []string {
	args := append([]string{"--identity=" + id}, durationFlags()...)
	args = append(args, relectFlags...)
	args = append(args, namespace+"/"+lease, "--")
	return append(args, w.cmd(t, workerFlags...)...)
}

func isStart(id string) func(workerLine) bool {
	return func(l workerLine) bool { return l.Kind == "start" && l.ID == id }
}

// lineOf returns the index of pid's line of kind, or -1.
func lineOf(lines []workerLine, kind string, pid int) int {
	for i, l := range lines {
		if l.Kind == kind && l.PID == pid {
			return i
		}
	}
	return -1
}

// TestCommandRun: `relect run` candidates whose CMDs (workers) append
// start and stop lines to one file, and hold a lock that only one live
// worker can hold. SIGKILL of the leading relect kills its CMD (the
// parent-death signal) and another candidate takes over; SIGTERM stops the
// CMD before the lease passes on; a CMD that ignores SIGTERM is killed
// after the grace period, and only then does the lease pass on. Never two
// CMDs at once.
func TestCommandRun(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	w := newWorkers(t)
	watch := c.watchLease(t, lease)
	procs := map[string]*relectProc{}
	start := func(id string, workerFlags ...string) *relectProc {
		p := c.startRelect(t, id, "run", runArgs(t, w, id, lease, nil, workerFlags...)...)
		procs[id] = p
		return p
	}
	start("a")
	start("b")
	// The Lease does not exist yet: it is created LeaseDuration after the
	// candidates found it missing.
	i1, first := w.awaitLine(t, 0, leaseDuration+maxAcquireWait()+10*time.Second, "the first CMD", func(l workerLine) bool { return l.Kind == "start" })
	other := map[string]string{"a": "b", "b": "a"}[first.ID]
	t.Logf("%s leads (term %s): its CMD is pid %d", first.ID, first.Term, first.PID)

	// SIGKILL of the leading relect: its CMD dies with it, and the other
	// candidate takes over once the lease expires.
	killed := procs[first.ID].signal(syscall.SIGKILL)
	cmdDead := w.awaitDead(t, first.PID, 10*time.Second)
	t.Logf("SIGKILL of relect %s: its CMD was seen dead %v later (polled every 1 ms)", first.ID, cmdDead.Sub(killed).Round(100*time.Microsecond))
	i2, second := w.awaitLine(t, i1+1, leaseDuration+2*maxAcquireWait()+slack, other+"'s CMD", isStart(other))
	t.Logf("%s's CMD started %s after the SIGKILL", other, ms(second.time().Sub(killed)))

	// SIGTERM of the leader hands over once its CMD has exited. The next
	// candidate's CMD ignores SIGTERM (used below).
	cand := start("c", "-on-term=ignore")
	waitFor(t, 10*time.Second, "c to follow "+other, func() bool { return cand.logHas("new-leader", "leader="+other) })
	sent := procs[other].terminate()
	i3, third := w.awaitLine(t, i2+1, maxAcquireWait()+slack, "c's CMD", isStart("c"))
	lines := w.lines(t)
	if stop := lineOf(lines, "stop", second.PID); stop < 0 || stop > i3 {
		t.Errorf("%s's CMD has no stop line before c's CMD started (stop line %d, start %d)", other, stop, i3)
	}
	t.Logf("SIGTERM of relect %s: c's CMD started %s later", other, ms(third.time().Sub(sent)))

	// c's CMD ignores SIGTERM: it is killed after the grace period, and
	// only then does the lease pass to d.
	d := start("d")
	waitFor(t, 10*time.Second, "d to follow c", func() bool { return d.logHas("new-leader", "leader=c") })
	sent = cand.signal(syscall.SIGTERM)
	died := w.awaitDead(t, third.PID, defaultGrace()+10*time.Second)
	if died.Sub(sent) < defaultGrace() {
		t.Errorf("c's CMD died %v after SIGTERM, before the grace period %v ended", died.Sub(sent), defaultGrace())
	}
	if code := cand.exitCode(renewDeadline + 10*time.Second); code != 0 {
		t.Errorf("relect c exited %d after SIGTERM, want 0", code)
	}
	_, fourth := w.awaitLine(t, i3+1, maxAcquireWait()+slack, "d's CMD", isStart("d"))
	t.Logf("c's CMD ignored SIGTERM and was killed %s after it (grace %v); d's CMD started %s after the SIGTERM",
		ms(died.Sub(sent)), defaultGrace(), ms(fourth.time().Sub(sent)))

	sent = d.terminate()
	w.checkSafety(t)
	released := watch.await(t, sent, 5*time.Second, "the release after d stopped", func(o leaseObs) bool { return o.exists && o.holder == "" })
	t.Logf("the lease was seen released %s after SIGTERM of d", ms(released.at.Sub(sent)))
}

// TestCommandRunRestart: a CMD that exits while its relect leads is run
// again in the same term with --restart=always; with --restart=never its
// exit ends the term, the lease is released, the next candidate takes over
// at once and relect exits with CMD's status.
func TestCommandRunRestart(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	w := newWorkers(t)
	e := c.startRelect(t, "e", "run", runArgs(t, w, "e", lease, []string{"--restart=always", "--restart-delay=100ms"},
		"-exit-after=200ms", "-exit-code=3")...)
	i, first := w.awaitLine(t, 0, leaseDuration+maxAcquireWait()+10*time.Second, "e's CMD", isStart("e"))
	for range 2 {
		var next workerLine
		i, next = w.awaitLine(t, i+1, 10*time.Second, "e's CMD again", isStart("e"))
		if next.Term != first.Term || next.PID == first.PID {
			t.Errorf("restarted CMD %v, want a new process in term %s", next, first.Term)
		}
	}
	if h := ptrVal(c.getLease(t, lease).Spec.HolderIdentity); h != "e" {
		t.Errorf("holder %q while e restarts its CMD, want e", h)
	}
	e.terminate()

	// --restart=never: f leads (the lease was just released), g stands by.
	f := c.startRelect(t, "f", "run", runArgs(t, w, "f", lease, []string{"--restart=never"}, "-exit-after=2s", "-exit-code=7")...)
	i, _ = w.awaitLine(t, i+1, maxAcquireWait()+10*time.Second, "f's CMD", isStart("f"))
	g := c.startRelect(t, "g", "run", runArgs(t, w, "g", lease, nil)...)
	iExit, exit := w.awaitLine(t, i+1, 10*time.Second, "f's CMD to exit", func(l workerLine) bool { return l.Kind == "exit" && l.ID == "f" })
	if code := f.exitCode(renewDeadline + 10*time.Second); code != 7 {
		t.Errorf("relect f exited %d, want its CMD's 7", code)
	}
	_, gStart := w.awaitLine(t, iExit+1, maxAcquireWait()+slack, "g's CMD", isStart("g"))
	t.Logf("f's CMD exited with 7; g's CMD started %s later", ms(gStart.time().Sub(exit.time())))
	g.terminate()
	w.checkSafety(t)
}

// TestCommandRunPartition: black-hole the leading relect's link to the
// apiserver for longer than the renew deadline. Its term ends, its CMD is
// stopped, and only after that does another candidate lead and start its
// CMD; once healed, the cut-off relect follows the new leader.
func TestCommandRunPartition(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	w := newWorkers(t)
	watch := c.watchLease(t, lease)
	procs := map[string]*relectProc{}
	for _, id := range []string{"a", "b"} {
		procs[id] = c.startRelect(t, id, "run", runArgs(t, w, id, lease, nil)...)
	}
	i1, first := w.awaitLine(t, 0, leaseDuration+maxAcquireWait()+10*time.Second, "the first CMD", func(l workerLine) bool { return l.Kind == "start" })
	cut, other := procs[first.ID], procs[map[string]string{"a": "b", "b": "a"}[first.ID]]
	time.Sleep(retryPeriod)

	if err := cut.proxy.Blackhole(); err != nil {
		t.Fatal(err)
	}
	partitioned := time.Now()
	i2, second := w.awaitLine(t, i1+1, leaseDuration+2*maxAcquireWait()+slack, other.id+"'s CMD", isStart(other.id))
	lines := w.lines(t)
	stop := lineOf(lines, "stop", first.PID)
	if stop < 0 || stop > i2 {
		t.Fatalf("SAFETY: %s's CMD has no stop line before %s's CMD started (stop line %d, start %d)", cut.id, other.id, stop, i2)
	}
	stopped := lines[stop].time()
	_, acquired, ok := watch.takeover(cut.id, partitioned, 10*time.Second)
	if !ok {
		t.Fatalf("no takeover by %s observed; changes: %v", other.id, watch.changes())
	}
	if !stopped.Before(acquired.at) {
		t.Errorf("SAFETY: %s's CMD stopped at %s, after %s's acquisition was observed at %s",
			cut.id, stopped.Format("15:04:05.000"), other.id, acquired.at.Format("15:04:05.000"))
	}
	t.Logf("partitioned %s: its CMD stopped %s after the partition (renew deadline %v); %s's acquisition was observed %s after that, its CMD started %s after it",
		cut.id, ms(stopped.Sub(partitioned)), renewDeadline, other.id, ms(acquired.at.Sub(stopped)), ms(second.time().Sub(stopped)))

	if err := cut.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, leaseDuration+2*maxAcquireWait()+slack, cut.id+" to observe "+other.id+" after healing", func() bool {
		return cut.logHas("new-leader", "leader="+other.id)
	})
	cut.terminate()
	other.terminate()
	w.checkSafety(t)
}
