package shards

import (
	"context"
	"log/slog"
)

// Logs returns a shard child's log handler over h: each record carries
// the shard, and at Info only the messages in info are kept (the root
// package's: started-leading, stopped-leading, released); the rest of a
// shard's Info — client-go's acquire lines, new-leader — goes to Debug,
// so that S shards do not multiply the election's Info lines by S.
func Logs(h slog.Handler, shard string, info map[string]bool) slog.Handler {
	return logs{h: h, shard: shard, info: info}
}

type logs struct {
	h     slog.Handler
	shard string
	info  map[string]bool // never written
}

func (s logs) Enabled(ctx context.Context, level slog.Level) bool {
	return s.h.Enabled(ctx, level)
}

func (s logs) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone() // r may share its attributes with the caller's
	if r.Level == slog.LevelInfo && !s.info[r.Message] {
		if !s.h.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	r.AddAttrs(slog.String("shard", s.shard))
	return s.h.Handle(ctx, r)
}

func (s logs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logs{h: s.h.WithAttrs(attrs), shard: s.shard, info: s.info}
}

func (s logs) WithGroup(name string) slog.Handler {
	return logs{h: s.h.WithGroup(name), shard: s.shard, info: s.info}
}
