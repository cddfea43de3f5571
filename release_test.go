package relect_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/require"
)

// A candidate that stops while an acquiring write of its own is unresolved
// releases the Lease if it finds that write applied. It must not release a
// record that names it but that it never wrote — here an operator's hand
// edit, naming it while another candidate leads: the leader, whose watch
// is gone, learns of the edit only at its next renewal, and a release would
// let a third candidate lead meanwhile. Found by the fault simulation (seed
// 2057: two leaders for 4.4 s).
func TestStopReleasesOnlyWhatItWrote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		// x's acquiring write is sent and refused, and l takes the lease
		// before x tries again: x has sent an acquiring write, and cannot
		// know that it was not applied (as after a timeout).
		x := newCandidate(t, api, "x", noRegistry)
		x.client.FailVerb(relecttest.VerbUpdate, relecttest.Error(500))
		x.start()
		synctest.Wait()
		x.client.Heal()
		l := newCandidate(t, api, "l", noRegistry)
		l.start()
		waitFor(t, ld, "l leads", l.e.IsLeader)
		require.Equal(t, 1, x.client.Calls(relecttest.VerbUpdate), "x sent one acquiring write")
		time.Sleep(rp / 4) // l renewed; its next renewal is RetryPeriod later
		api.CloseWatches() // l learns of edits only when it renews
		y := newCandidate(t, api, "y", noRegistry)
		y.start()
		synctest.Wait()

		require.NoError(t, api.SetHolder(ns, lease, "x"))
		x.stop()
		ctx, cancel := context.WithTimeout(context.Background(), rp)
		defer cancel()
		for ctx.Err() == nil {
			synctest.Wait()
			if got := leaders(l, y); len(got) > 1 {
				t.Errorf("two leaders %v: x released a record it did not write", got)
				break
			}
			time.Sleep(time.Millisecond)
		}
		l.stop()
		y.stop()
	})
}
