package mirror

import (
	"errors"
	"fmt"
)

// ErrDiverged is returned when the target does not make the source's
// revision, or does not hold the state the source had before it.
var ErrDiverged = errors.New("mirror: the target diverged from the source")

// SourceCompactedError is returned when the source compacted the history the
// replay needs: the target can never catch up; the caller rolls back and
// starts again from a new snapshot.
type SourceCompactedError struct {
	Source string
	// Need is the first revision the replay needs; Compacted the source's
	// compacted revision.
	Need, Compacted int64
}

func (e *SourceCompactedError) Error() string {
	at := "above it"
	if e.Compacted > 0 {
		at = fmt.Sprintf("at %d", e.Compacted)
	}
	return fmt.Sprintf("%s compacted its history past revision %d, which the replay needs (compacted %s): the target cannot catch up; roll back and start again from a new snapshot",
		e.Source, e.Need, at)
}

// fatal marks an error after which the replay must not restart by itself:
// the mode records it as failed.
type fatal struct{ err error }

func (f fatal) Error() string { return f.err.Error() }
func (f fatal) Unwrap() error { return f.err }

// isFatal reports whether err stops the replay for good.
func isFatal(err error) bool {
	var f fatal
	var c *SourceCompactedError
	return errors.As(err, &f) || errors.As(err, &c) || errors.Is(err, ErrDiverged)
}

func diverged(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrDiverged, fmt.Sprintf(format, args...))
}
