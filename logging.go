package relect

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// maxQueuedLogs bounds the log records waiting for a slow handler; beyond it
// the oldest are dropped and counted.
const maxQueuedLogs = 1024

// logQueue hands relect's log records, and those client-go writes through
// klog, to Options.Logger's handler from a goroutine of its own, in the
// order they were queued. Nothing that runs the election ever calls the
// handler: a handler that blocks (a stalled pipe, a slow network sink)
// delays only the log, never a renewal. When more than maxQueuedLogs
// records wait, the oldest is dropped; a warning says how many were lost.
// The goroutine runs only while records wait (onDemand): an idle follower
// logs nothing and costs none.
//
// Records queued while no Run is active wait for the next one. start and
// stop bracket a Run: stop returns once every queued record was handled.
type logQueue struct {
	handler slog.Handler // Options.Logger's
	drainer onDemand

	mu      sync.Mutex // guards the fields below
	queue   []queuedLog
	dropped int
	active  bool // a Run is active: records are handled as they come
}

// queuedLog is a record and the handler it is for (the user's, or one
// derived from it by client-go's WithValues).
type queuedLog struct {
	h slog.Handler
	r slog.Record
}

func newLogQueue(h slog.Handler) *logQueue {
	return &logQueue{handler: h}
}

// log queues one of relect's own records. It never calls the handler, so
// it may be called with the Elector's state lock held; the handler's
// Enabled is asked later, from the queue's goroutine.
func (q *logQueue) log(level slog.Level, msg string, attrs ...any) {
	r := slog.NewRecord(time.Now(), level, msg, 0)
	r.Add(attrs...)
	q.push(q.handler, r)
}

func (q *logQueue) push(h slog.Handler, r slog.Record) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) == maxQueuedLogs {
		q.queue = q.queue[1:]
		q.dropped++
	}
	q.queue = append(q.queue, queuedLog{h, r})
	if q.active {
		q.drainer.kick(q.drain)
	}
}

// start has records handled as they come, those queued before included,
// and returns the function that stops it once the queue is empty.
func (q *logQueue) start() (stop func()) {
	q.mu.Lock()
	q.active = true
	q.drainer.kick(q.drain)
	q.mu.Unlock()
	return func() {
		q.mu.Lock()
		q.active = false
		q.drainer.kick(q.drain) // whatever came last
		q.mu.Unlock()
		q.drainer.wait()
	}
}

// drain hands every queued record to its handler, and reports whether it
// found any.
func (q *logQueue) drain() bool {
	q.mu.Lock()
	batch, dropped := q.queue, q.dropped
	q.queue, q.dropped = nil, 0
	q.mu.Unlock()
	if len(batch) == 0 && dropped == 0 {
		return false
	}
	if dropped > 0 {
		r := slog.NewRecord(time.Now(), slog.LevelWarn, "relect: log records dropped: the Logger's handler was too slow", 0)
		r.Add("dropped", dropped)
		handle(q.handler, r)
	}
	for _, l := range batch {
		handle(l.h, l.r)
	}
	return true
}

// handle calls h for r if h is enabled for r's level. A panic in the
// handler loses that record and is otherwise ignored: the logger is the
// one place it could be reported.
func handle(h slog.Handler, r slog.Record) {
	defer func() { _ = recover() }()
	if h.Enabled(context.Background(), r.Level) {
		_ = h.Handle(context.Background(), r)
	}
}

// queuedHandler is the slog.Handler client-go's klog output goes to (through
// logr): it queues each record on a logQueue instead of handling it on
// client-go's goroutine, which may be the one renewing the lease.
type queuedHandler struct {
	q *logQueue
	h slog.Handler // the user's, with client-go's attributes and groups
}

// Enabled asks the user's handler, which slog requires to be quick; it
// spares formatting the records nobody wants (client-go's V(4) and V(5)
// lines at every renewal).
func (qh queuedHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return qh.h.Enabled(ctx, level)
}

func (qh queuedHandler) Handle(_ context.Context, r slog.Record) error {
	qh.q.push(qh.h, r.Clone())
	return nil
}

func (qh queuedHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return queuedHandler{qh.q, qh.h.WithAttrs(attrs)}
}

func (qh queuedHandler) WithGroup(name string) slog.Handler {
	return queuedHandler{qh.q, qh.h.WithGroup(name)}
}
