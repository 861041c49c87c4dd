package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// serverLogger routes the Temporal server's logs to slog, dropping everything
// below level: at info the server logs every shard, queue and membership event,
// which buries the dev stack's own output.
type serverLogger struct {
	log *slog.Logger
}

func newServerLogger(base *slog.Logger, level slog.Leveler) serverLogger {
	return serverLogger{log: slog.New(levelHandler{Handler: base.Handler(), level: level})}
}

// levelHandler raises the minimum level of the handler it wraps.
type levelHandler struct {
	slog.Handler
	level slog.Leveler
}

func (h levelHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= h.level.Level() && h.Handler.Enabled(ctx, level)
}

func (h levelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return levelHandler{Handler: h.Handler.WithAttrs(attrs), level: h.level}
}

func (h levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{Handler: h.Handler.WithGroup(name), level: h.level}
}

var (
	_ log.Logger      = serverLogger{}
	_ log.WithLogger  = serverLogger{}
	_ log.SLogWrapper = serverLogger{}
)

func (l serverLogger) Debug(msg string, tags ...tag.Tag) { l.emit(slog.LevelDebug, msg, tags) }
func (l serverLogger) Info(msg string, tags ...tag.Tag)  { l.emit(slog.LevelInfo, msg, tags) }
func (l serverLogger) Warn(msg string, tags ...tag.Tag)  { l.emit(slog.LevelWarn, msg, tags) }
func (l serverLogger) Error(msg string, tags ...tag.Tag) { l.emit(slog.LevelError, msg, tags) }

// DPanic only panics in development builds of zap; here it is an error.
func (l serverLogger) DPanic(msg string, tags ...tag.Tag) { l.emit(slog.LevelError, msg, tags) }

// Panic and Fatal must not return: the server calls Fatal when, for example,
// it cannot bind a listener, and carries on with a nil value if the logger
// returns. Panicking (instead of exiting as zap would) lets StartTemporal turn
// failures during startup into errors.
func (l serverLogger) Panic(msg string, tags ...tag.Tag) {
	l.emit(slog.LevelError, msg, tags)
	panic(serverPanic{msg: msg, tags: tags})
}

func (l serverLogger) Fatal(msg string, tags ...tag.Tag) {
	l.emit(slog.LevelError, msg, tags)
	panic(serverPanic{msg: msg, tags: tags})
}

func (l serverLogger) With(tags ...tag.Tag) log.Logger {
	return serverLogger{log: l.log.With(attrsAny(tags)...)}
}

// SLog lets server code that wants an slog.Logger (log.NewSlogLogger) use ours.
func (l serverLogger) SLog() *slog.Logger { return l.log }

func (l serverLogger) emit(level slog.Level, msg string, tags []tag.Tag) {
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	attrs := make([]slog.Attr, len(tags))
	for i, t := range tags {
		attrs[i] = slog.Any(t.Key(), t.Value())
	}
	l.log.LogAttrs(context.Background(), level, msg, attrs...)
}

func attrsAny(tags []tag.Tag) []any {
	out := make([]any, len(tags))
	for i, t := range tags {
		out[i] = slog.Any(t.Key(), t.Value())
	}
	return out
}

// serverPanic is what serverLogger panics with on Fatal and Panic.
type serverPanic struct {
	msg  string
	tags []tag.Tag
}

// Unwrap exposes the errors among the tags, so that errors.Is finds, say,
// syscall.EADDRINUSE from a failed listen. A server tag's Value is the
// error's text: the error itself is in its zap field.
func (p serverPanic) Unwrap() []error {
	var errs []error
	for _, t := range p.tags {
		v := t.Value()
		if zt, ok := t.(tag.ZapTag); ok {
			v = zt.Field().Interface
		}
		if err, ok := v.(error); ok {
			errs = append(errs, err)
		}
	}
	return errs
}

func (p serverPanic) Error() string {
	s := p.msg
	for _, t := range p.tags {
		s += fmt.Sprintf(" %s=%v", t.Key(), t.Value())
	}
	return s
}

// serverLevel is the least level of server logs passed on. The server logs
// warnings while it starts (services dialing others not listening yet) and
// errors while it stops (cancelled polls, connections refused by services
// already gone); neither tells a user anything, so only errors pass while it
// starts and nothing once it stops.
type serverLevel struct {
	base  slog.Leveler
	floor atomic.Int64 // a slog.Level; the effective level is max(base, floor)
}

// levelSilent is above every level slog defines.
const levelSilent = slog.Level(1 << 20)

func newServerLevel(base slog.Leveler) *serverLevel {
	l := &serverLevel{base: base}
	l.floor.Store(int64(slog.LevelError))
	return l
}

func (l *serverLevel) Level() slog.Level {
	return max(l.base.Level(), slog.Level(l.floor.Load()))
}

func (l *serverLevel) started()  { l.floor.Store(int64(slog.LevelDebug - 4)) }
func (l *serverLevel) stopping() { l.floor.Store(int64(levelSilent)) }
