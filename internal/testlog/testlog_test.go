package testlog_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/internal/testlog"
	"github.com/stretchr/testify/assert"
)

func TestHandlerKeepsWhatIsAtItsLevel(t *testing.T) {
	h := &testlog.Handler{Level: slog.LevelWarn}
	log := slog.New(h).With("ignored", true)
	log.Info("relect: started-leading", "term", 1)
	log.Warn("relect: degraded", "lease", "default/job", "failures", 2)
	log.Error("relect: error")
	assert.Equal(t, []string{"relect: degraded", "relect: error"}, h.Messages())
	assert.Equal(t, []string{"WARN relect: degraded lease=default/job failures=2", "ERROR relect: error"}, h.Lines())
	assert.Equal(t, []string{"WARN relect: degraded lease=default/job failures=2"}, h.Naming("degraded", "failures=2"))
	assert.Empty(t, h.Naming("degraded", "failures=3"))
	assert.Equal(t, slog.LevelError, h.Records()[1].Level)

	var zero testlog.Handler
	assert.False(t, zero.Enabled(context.Background(), slog.LevelDebug), "the zero value keeps Info and above")
	assert.True(t, zero.Enabled(context.Background(), slog.LevelInfo))
	assert.True(t, (&testlog.Handler{Level: testlog.All}).Enabled(context.Background(), slog.Level(-5)), "client-go's V(5)")
}

func TestHandlerWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		h := &testlog.Handler{Wait: func() { <-release }}
		var wg sync.WaitGroup
		wg.Go(func() { slog.New(h).Info("first") })
		time.Sleep(time.Hour)
		synctest.Wait()
		assert.Empty(t, h.Records(), "blocked in Handle")
		close(release)
		wg.Wait()
		assert.Equal(t, []string{"first"}, h.Messages())
	})
}
