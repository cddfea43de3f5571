package logq

import (
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/relect/relect/internal/testlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// When a slow handler lets more than MaxQueued records wait, the
// warning that reports the oldest dropped says what they were: how many,
// their levels, their most frequent messages, and when. It said how many
// only ("log records dropped: the Logger's handler was too slow").
func TestDroppedLogsSayWhatWasDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		h := &testlog.Handler{Level: testlog.All, Wait: func() { <-release }}
		q := New(h)
		stop := q.Start()
		q.Log(slog.LevelInfo, "first") // the handler blocks on it
		synctest.Wait()
		for i := range MaxQueued + 30 {
			if i < 20 {
				q.Log(slog.LevelInfo, "relect: started-leading")
			} else {
				q.Log(slog.LevelDebug, "relect: the work check failed")
			}
		}
		close(release)
		stop()
		recs := h.Records()

		var warning *slog.Record
		for i, r := range recs {
			if strings.Contains(r.Message, "log records dropped") {
				warning = &recs[i]
			}
		}
		require.NotNil(t, warning, "a warning of the records dropped")
		assert.Equal(t, slog.LevelWarn, warning.Level)
		attrs := map[string]string{}
		warning.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value.String()
			return true
		})
		assert.Equal(t, "30", attrs["dropped"])
		assert.Equal(t, "DEBUG×10 INFO×20", attrs["levels"])
		assert.Equal(t, `"relect: started-leading"×20 "relect: the work check failed"×10`, attrs["messages"])
		assert.NotEmpty(t, attrs["oldest"])
		assert.Contains(t, warning.Message, "30 log records dropped")
		assert.Len(t, recs, 1+MaxQueued+1, "the first, the warning, and the records kept")
	})
}
