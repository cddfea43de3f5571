package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// leaderJSON is what the sidecar's GET /leader serves and its --file holds.
type leaderJSON struct {
	Lease      string     `json:"lease"`
	Identity   string     `json:"identity"`
	Leader     string     `json:"leader"`
	Leading    bool       `json:"leading"`
	Term       *int64     `json:"term"`
	ValidUntil *time.Time `json:"valid_until"`
}

// sidecar is one `relect sidecar` with the address it serves on and the
// latest valid_until it handed this test.
type sidecar struct {
	*relectProc
	addr, file string

	mu          sync.Mutex
	latestValid time.Time
}

func (c *cluster) startSidecar(t *testing.T, id, lease string) *sidecar {
	t.Helper()
	s := &sidecar{addr: freeAddr(t), file: filepath.Join(t.TempDir(), "leader.json")}
	s.relectProc = c.startRelect(t, id, "sidecar", append(durationFlags(), "--identity="+id,
		"--http-addr="+s.addr, "--file="+s.file, namespace+"/"+lease)...)
	return s
}

// leader asks GET /leader; ok is false while the sidecar does not answer.
func (s *sidecar) leader() (st leaderJSON, ok bool) {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + s.addr + "/leader")
	if err != nil {
		return st, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
		return st, false
	}
	if st.ValidUntil != nil {
		s.mu.Lock()
		if st.ValidUntil.After(s.latestValid) {
			s.latestValid = *st.ValidUntil
		}
		s.mu.Unlock()
	}
	return st, true
}

// fromFile reads the state file; ok is false while there is none.
func (s *sidecar) fromFile(t *testing.T) (st leaderJSON, ok bool) {
	t.Helper()
	data, err := os.ReadFile(s.file)
	if os.IsNotExist(err) {
		return st, false
	}
	if err == nil {
		err = json.Unmarshal(data, &st) // never partial: it is replaced whole
	}
	if err != nil {
		t.Fatalf("%s's state file: %v", s.id, err)
	}
	if st.ValidUntil != nil {
		s.mu.Lock()
		if st.ValidUntil.After(s.latestValid) {
			s.latestValid = *st.ValidUntil
		}
		s.mu.Unlock()
	}
	return st, true
}

// keepAsking asks /leader and reads the file every few milliseconds, as
// a program would, until stop is closed or the sidecar has exited.
func (s *sidecar) keepAsking(t *testing.T, stop <-chan struct{}) (done <-chan struct{}) {
	d := make(chan struct{})
	go func() {
		defer close(d)
		for {
			select {
			case <-stop:
				return
			case <-s.waited:
				return
			case <-time.After(5 * time.Millisecond):
			}
			s.leader()
			s.fromFile(t)
		}
	}()
	return d
}

// TestCommandSidecar: two handovers between sidecars, each by SIGTERM of
// the leader. /leader and the state file follow the leader and its term;
// /healthz and /metrics answer; and every handover waits until the
// validity the old leader handed out has passed, so that a program acting
// only before the valid_until it read never overlaps the next leader.
func TestCommandSidecar(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	watch := c.watchLease(t, lease)
	s1 := c.startSidecar(t, "s1", lease)
	s2 := c.startSidecar(t, "s2", lease)
	var leader, standby *sidecar
	waitFor(t, leaseDuration+maxAcquireWait()+10*time.Second, "a sidecar to say it leads", func() bool {
		for _, s := range []*sidecar{s1, s2} {
			if st, ok := s.leader(); ok && st.Leading {
				leader, standby = s, map[*sidecar]*sidecar{s1: s2, s2: s1}[s]
				return true
			}
		}
		return false
	})
	if code, body := httpGet(t, "http://"+leader.addr+"/healthz"); code != http.StatusOK {
		t.Errorf("%s /healthz: %d %s", leader.id, code, body)
	}
	want := `relect_is_leader{lease="` + lease + `",lease_namespace="` + namespace + `"} 1`
	if code, body := httpGet(t, "http://"+leader.addr+"/metrics"); code != http.StatusOK || !strings.Contains(body, want) {
		t.Errorf("%s /metrics: %d, want a line %q", leader.id, code, want)
	}

	for round := 1; round <= 2; round++ {
		if round == 2 {
			// A third sidecar, so that the next handover has one
			// standby to go to.
			standby = c.startSidecar(t, "s3", lease)
		}
		st, _ := leader.leader()
		if st.Term == nil || st.ValidUntil == nil || st.Leader != leader.id || st.Lease != namespace+"/"+lease || st.Identity != leader.id {
			t.Fatalf("round %d: %s's /leader says %+v", round, leader.id, st)
		}
		term := *st.Term
		waitFor(t, 10*time.Second, standby.id+" to see "+leader.id, func() bool {
			sst, ok := standby.leader()
			fst, fok := standby.fromFile(t)
			return ok && sst.Leader == leader.id && !sst.Leading && sst.Term != nil && *sst.Term == term &&
				fok && fst.Leader == leader.id && !fst.Leading
		})
		if st, _ := leader.fromFile(t); !st.Leading || st.ValidUntil == nil {
			t.Errorf("round %d: %s's file says %+v while it leads", round, leader.id, st)
		}

		stop := make(chan struct{})
		asking := leader.keepAsking(t, stop)
		sent := leader.terminate()
		close(stop)
		<-asking
		var now leaderJSON
		waitFor(t, renewDeadline+maxAcquireWait()+slack, standby.id+" to say it leads", func() bool {
			now, _ = standby.leader()
			return now.Leading
		})
		if now.Term == nil || *now.Term <= term || now.Leader != standby.id {
			t.Errorf("round %d: the new leader's /leader says %+v after term %d", round, now, term)
		}
		_, acquired, ok := watch.takeover(leader.id, sent.Add(-time.Second), 10*time.Second)
		if !ok {
			t.Fatalf("round %d: no takeover observed; changes: %v", round, watch.changes())
		}
		leader.mu.Lock()
		handedOut := leader.latestValid
		leader.mu.Unlock()
		if !handedOut.Before(acquired.at) {
			t.Errorf("round %d: %s acquired the lease at %s, before the validity %s handed out (%s) had passed",
				round, standby.id, acquired.at.Format("15:04:05.000"), leader.id, handedOut.Format("15:04:05.000"))
		}
		t.Logf("round %d: SIGTERM of %s; %s acquired %s later, %s after the last valid_until %s handed out; its /leader says term %d",
			round, leader.id, standby.id, ms(acquired.at.Sub(sent)), ms(acquired.at.Sub(handedOut)), leader.id, *now.Term)
		leader = standby
	}
	leader.terminate()
}
