package ctrlrt

import (
	"context"
	"testing"
	"time"

	"github.com/relect/relect/relecttest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// TestLockUpdateIsConditionalOnWhatClientGoSaw: client-go decides on the
// record Get gave it; when the Lease changes after that (the holder
// renewed), the Lock's Update must not be based on the newer version its
// watch has delivered meanwhile — that would take a lease renewed under
// client-go's nose. It fails with a conflict, and the next Get reads the
// Lease from the API.
func TestLockUpdateIsConditionalOnWhatClientGoSaw(t *testing.T) {
	const ns, name = "default", "lock"
	api := relecttest.NewLeaseAPI()
	api.PutReleased(ns, name)
	if err := api.SetHolder(ns, name, "x"); err != nil {
		t.Fatal(err)
	}
	h := api.Client("a")
	l, err := NewLock(LockOptions{Client: h.Clientset(), Namespace: ns, Name: name, Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan error, 1)
	go func() { watched <- l.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-watched; err != nil {
			t.Errorf("Start: %v", err)
		}
	}()
	waitUntil(t, "the watch to sync", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.synced
	})

	rec, _, err := l.Get(ctx)
	if err != nil || rec.HolderIdentity != "x" {
		t.Fatalf("Get: %+v, %v", rec, err)
	}
	seen := api.Lease(ns, name).ResourceVersion
	if err := api.SetHolder(ns, name, "x"); err != nil { // x renews
		t.Fatal(err)
	}
	renewed := api.Lease(ns, name).ResourceVersion
	waitUntil(t, "the watch to deliver the renewal", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.observed != nil && l.observed.ResourceVersion == renewed
	})

	take := *rec
	take.HolderIdentity, take.LeaderTransitions = "a", rec.LeaderTransitions+1
	err = l.Update(ctx, take)
	if !apierrors.IsConflict(err) {
		t.Fatalf("Update based on resourceVersion %s after the holder renewed (%s): %v, want a conflict", seen, renewed, err)
	}
	if got := api.Holder(ns, name); got != "x" {
		t.Fatalf("the Lease is held by %q after the conflicting Update", got)
	}
	before := l.Stats()
	if _, _, err := l.Get(ctx); err != nil {
		t.Fatal(err)
	}
	after := l.Stats()
	if after.Conflicts != 1 || after.APIGets != before.APIGets+1 {
		t.Errorf("after the conflict: stats %+v then %+v, want 1 conflict and the next Get from the API", before, after)
	}
	var _ resourcelock.Interface = l
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: did not happen within 30s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
