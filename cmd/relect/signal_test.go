//go:build unix

package main

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The first SIGTERM or SIGINT cancels the context, naming the signal; the
// second closes its hurry channel, and relect goes on ending instead of
// dying at once (exit 143, the Lease left held) as it did.
func TestStopSignals(t *testing.T) {
	ctx, stop := stopSignals()
	defer stop()
	hurry := hurryOf(ctx)
	require.NotNil(t, hurry)

	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the first SIGTERM did not cancel the context")
	}
	assert.True(t, errors.Is(context.Cause(ctx), errSignal), "cause %v", context.Cause(ctx))
	select {
	case <-hurry:
		t.Fatal("hurried by the first signal")
	default:
	}

	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	select {
	case <-hurry:
	case <-time.After(10 * time.Second):
		t.Fatal("the second signal did not hurry the stop")
	}
	// (A third is ignored; it is not sent here: one that arrived after
	// stop restored the default action would end the test binary.)
}

func TestNoHurryOutsideMain(t *testing.T) {
	assert.Nil(t, hurryOf(context.Background()), "a nil channel: never ready")
}
