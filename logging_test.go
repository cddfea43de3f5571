package relect_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/relect/relect"
	"github.com/stretchr/testify/assert"
)

// recordHandler keeps every record's message.
type recordHandler struct {
	mu   *sync.Mutex
	msgs *[]string
}

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.msgs = append(*h.msgs, r.Message)
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }

// The wrapped client-go elector's klog output reaches Options.Logger, next to
// relect's own records.
func TestClientGoLogsReachTheSlogLogger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var msgs []string
		api := newAPI()
		a := newCandidate(t, api, "a", func(o *relect.Options) {
			o.Logger = slog.New(recordHandler{&mu, &msgs})
		})
		a.start()
		synctest.Wait()
		a.stop()
		mu.Lock()
		defer mu.Unlock()
		assert.Contains(t, msgs, "Successfully acquired lease", "client-go's klog line")
		assert.Contains(t, msgs, "relect: started-leading", "relect's own line")
	})
}
