package relect

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
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
	dropped droppedLogs
	active  bool // a Run is active: records are handled as they come
}

// droppedLogs sums up the records dropped since the last drain, for the
// warning that reports them: how many, of which levels, their messages
// (the most frequent), and when the oldest and the newest were written.
type droppedLogs struct {
	n              int
	levels         map[slog.Level]int
	messages       map[string]int // at most maxDroppedMessages; others counted in n only
	oldest, newest time.Time
}

// maxDroppedMessages bounds the distinct messages droppedLogs keeps.
const maxDroppedMessages = 16

func (d *droppedLogs) add(r slog.Record) {
	if d.n == 0 {
		d.levels, d.messages, d.oldest = map[slog.Level]int{}, map[string]int{}, r.Time
	}
	d.n++
	d.levels[r.Level]++
	if _, ok := d.messages[r.Message]; ok || len(d.messages) < maxDroppedMessages {
		d.messages[r.Message]++
	}
	d.newest = r.Time
}

// record is the warning that reports d: "dropped" the count, "levels"
// (e.g. "INFO×30 DEBUG×7"), "messages" the three most frequent with their
// counts, "oldest" and "newest" when they were written.
func (d *droppedLogs) record() slog.Record {
	r := slog.NewRecord(time.Now(), slog.LevelWarn, fmt.Sprintf(
		"relect: %d log records dropped, unhandled: the Logger's handler was too slow (more than %d waited)", d.n, maxQueuedLogs), 0)
	var levels []string
	for _, l := range slices.Sorted(maps.Keys(d.levels)) {
		levels = append(levels, fmt.Sprintf("%v×%d", l, d.levels[l]))
	}
	msgs := slices.SortedFunc(maps.Keys(d.messages), func(a, b string) int {
		return cmp.Or(cmp.Compare(d.messages[b], d.messages[a]), cmp.Compare(a, b))
	})
	var top []string
	for _, m := range msgs[:min(len(msgs), 3)] {
		top = append(top, fmt.Sprintf("%q×%d", m, d.messages[m]))
	}
	r.Add("dropped", d.n, "levels", strings.Join(levels, " "), "messages", strings.Join(top, " "),
		"oldest", d.oldest.Format(time.RFC3339Nano), "newest", d.newest.Format(time.RFC3339Nano))
	return r
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
		q.dropped.add(q.queue[0].r)
		q.queue = q.queue[1:]
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
	q.queue, q.dropped = nil, droppedLogs{}
	q.mu.Unlock()
	if len(batch) == 0 && dropped.n == 0 {
		return false
	}
	if dropped.n > 0 {
		handle(q.handler, dropped.record())
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

// defaultWarnings is the handler relect logs to when Options.Logger is
// nil: slog.Default()'s, as it is when each record is handled, for
// warnings and errors only — a stuck leader's warning, a registry turned
// off for lack of RBAC, failing calls — so that a program that gave no
// Logger still hears of them, and not of every event.
type defaultWarnings struct {
	with []func(slog.Handler) slog.Handler // WithAttrs and WithGroup, in order
}

func (d defaultWarnings) handler() slog.Handler {
	h := slog.Default().Handler()
	for _, f := range d.with {
		h = f(h)
	}
	return h
}

func (d defaultWarnings) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn && slog.Default().Handler().Enabled(ctx, level)
}

func (d defaultWarnings) Handle(ctx context.Context, r slog.Record) error {
	return d.handler().Handle(ctx, r)
}

func (d defaultWarnings) WithAttrs(attrs []slog.Attr) slog.Handler {
	return defaultWarnings{append(slices.Clip(d.with), func(h slog.Handler) slog.Handler { return h.WithAttrs(attrs) })}
}

func (d defaultWarnings) WithGroup(name string) slog.Handler {
	return defaultWarnings{append(slices.Clip(d.with), func(h slog.Handler) slog.Handler { return h.WithGroup(name) })}
}
