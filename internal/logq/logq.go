// Package logq is relect's log queue: it hands relect's log records, and
// those client-go writes through klog, to the user's slog handler from a
// goroutine of its own, so that nothing that runs the election ever calls
// the handler. It also holds DefaultWarnings, the handler relect logs to
// when Options.Logger is nil. It knows nothing of elections.
package logq

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

	"github.com/relect/relect/internal/ondemand"
)

// MaxQueued bounds the log records waiting for a slow handler; beyond it
// the oldest are dropped and counted.
const MaxQueued = 1024

// Queue hands relect's log records, and those client-go writes through
// klog, to Options.Logger's handler from a goroutine of its own, in the
// order they were queued. Nothing that runs the election ever calls the
// handler: a handler that blocks (a stalled pipe, a slow network sink)
// delays only the log, never a renewal. When more than MaxQueued
// records wait, the oldest is dropped; a warning says how many were lost.
// The goroutine runs only while records wait (internal/ondemand): an idle
// follower logs nothing and costs none.
//
// Records queued while no Run is active wait for the next one. Start and
// its stop bracket a Run: stop returns once every queued record was
// handled. Use New; a Queue is safe for concurrent use.
type Queue struct {
	handler slog.Handler // Options.Logger's
	drainer ondemand.Runner

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
		"relect: %d log records dropped, unhandled: the Logger's handler was too slow (more than %d waited)", d.n, MaxQueued), 0)
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

// New returns a Queue of records for h, not started.
func New(h slog.Handler) *Queue {
	return &Queue{handler: h}
}

// Log queues one of relect's own records, at level, with msg and attrs
// (slog's key-value pairs or Attrs). It never calls the handler, so
// it may be called with the Elector's state lock held; the handler's
// Enabled is asked later, from the queue's goroutine.
func (q *Queue) Log(level slog.Level, msg string, attrs ...any) {
	r := slog.NewRecord(time.Now(), level, msg, 0)
	r.Add(attrs...)
	q.push(q.handler, r)
}

func (q *Queue) push(h slog.Handler, r slog.Record) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) == MaxQueued {
		q.dropped.add(q.queue[0].r)
		q.queue = q.queue[1:]
	}
	q.queue = append(q.queue, queuedLog{h, r})
	if q.active {
		q.drainer.Kick(q.drain)
	}
}

// Start has records handled as they come, those queued before included,
// and returns the function that stops it once the queue is empty.
func (q *Queue) Start() (stop func()) {
	q.mu.Lock()
	q.active = true
	q.drainer.Kick(q.drain)
	q.mu.Unlock()
	return func() {
		q.mu.Lock()
		q.active = false
		q.drainer.Kick(q.drain) // whatever came last
		q.mu.Unlock()
		q.drainer.Wait()
	}
}

// drain hands every queued record to its handler, and reports whether it
// found any.
func (q *Queue) drain() bool {
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

// Handler returns the slog.Handler client-go's klog output goes to
// (through logr): it queues each record on q, for h, instead of handling
// it on client-go's goroutine, which may be the one renewing the lease.
func (q *Queue) Handler(h slog.Handler) slog.Handler { return queuedHandler{q, h} }

// queuedHandler is what Handler returns.
type queuedHandler struct {
	q *Queue
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

// DefaultWarnings is the handler relect logs to when Options.Logger is
// nil: slog.Default()'s, as it is when each record is handled, for
// warnings and errors only — a stuck leader's warning, a registry turned
// off for lack of RBAC, failing calls — so that a program that gave no
// Logger still hears of them, and not of every event.
type DefaultWarnings struct {
	with []func(slog.Handler) slog.Handler // WithAttrs and WithGroup, in order
}

func (d DefaultWarnings) handler() slog.Handler {
	h := slog.Default().Handler()
	for _, f := range d.with {
		h = f(h)
	}
	return h
}

func (d DefaultWarnings) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn && slog.Default().Handler().Enabled(ctx, level)
}

func (d DefaultWarnings) Handle(ctx context.Context, r slog.Record) error {
	return d.handler().Handle(ctx, r)
}

func (d DefaultWarnings) WithAttrs(attrs []slog.Attr) slog.Handler {
	return DefaultWarnings{append(slices.Clip(d.with), func(h slog.Handler) slog.Handler { return h.WithAttrs(attrs) })}
}

func (d DefaultWarnings) WithGroup(name string) slog.Handler {
	return DefaultWarnings{append(slices.Clip(d.with), func(h slog.Handler) slog.Handler { return h.WithGroup(name) })}
}
