package replica

import (
	"context"
	"fmt"
	"log/slog"
)

// raftLogger passes raft's logs to slog: its frequent Info lines (votes,
// elections) at debug level, warnings and errors as they are.
type raftLogger struct{ l *slog.Logger }

func newRaftLogger(l *slog.Logger) *raftLogger { return &raftLogger{l: l.With("component", "raft")} }

func (r *raftLogger) log(level slog.Level, format string, v ...any) {
	if r.l.Enabled(context.Background(), level) {
		r.l.Log(context.Background(), level, fmt.Sprintf(format, v...))
	}
}

func (r *raftLogger) Debug(v ...any)                   { r.log(slog.LevelDebug, "%s", fmt.Sprint(v...)) }
func (r *raftLogger) Debugf(format string, v ...any)   { r.log(slog.LevelDebug, format, v...) }
func (r *raftLogger) Info(v ...any)                    { r.log(slog.LevelDebug, "%s", fmt.Sprint(v...)) }
func (r *raftLogger) Infof(format string, v ...any)    { r.log(slog.LevelDebug, format, v...) }
func (r *raftLogger) Warning(v ...any)                 { r.log(slog.LevelWarn, "%s", fmt.Sprint(v...)) }
func (r *raftLogger) Warningf(format string, v ...any) { r.log(slog.LevelWarn, format, v...) }
func (r *raftLogger) Error(v ...any)                   { r.log(slog.LevelError, "%s", fmt.Sprint(v...)) }
func (r *raftLogger) Errorf(format string, v ...any)   { r.log(slog.LevelError, format, v...) }
func (r *raftLogger) Fatal(v ...any)                   { r.Panic(v...) }
func (r *raftLogger) Fatalf(format string, v ...any)   { r.Panicf(format, v...) }
func (r *raftLogger) Panic(v ...any) {
	s := fmt.Sprint(v...)
	r.l.Error(s)
	panic(s)
}
func (r *raftLogger) Panicf(format string, v ...any) { r.Panic(fmt.Sprintf(format, v...)) }
