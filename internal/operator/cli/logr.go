package cli

import (
	"log/slog"

	"github.com/go-logr/logr"
)

// logrFrom gives controller-runtime (which logs through logr) the process's
// slog handler, so every line is the same JSON.
func logrFrom(l *slog.Logger) logr.Logger { return logr.FromSlogHandler(l.Handler()) }
