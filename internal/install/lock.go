package install

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// ErrBusy is returned when another run holds the subject's lock.
var ErrBusy = errors.New("another quantykube install or undo is running on this host")

// lockRetry is how long Lock keeps trying a lock it finds taken: Busy (in
// another process) holds it for an instant to probe, and a run that meets
// such a probe must not be refused. A run holds it for seconds at least, so
// a real second run is still refused at once, in human terms.
const lockRetry = 250 * time.Millisecond

// Lock takes the exclusive lock at path, waiting at most lockRetry for a
// probe (Busy) to let go. Release it with the returned function; the kernel
// releases it if the process dies.
func Lock(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create lock directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := flockRetrying(f); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (lock %s); wait for it to finish", ErrBusy, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

// Busy reports whether another process holds the lock at path, without
// creating anything. It probes by taking the lock for an instant, which
// Lock's retry absorbs; a lock found taken is tried again for lockRetry, so
// another process's probe is not taken for a run.
func Busy(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := flockRetrying(f); err != nil {
		return errors.Is(err, unix.EWOULDBLOCK)
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

// flockRetrying takes f's exclusive flock, trying again for lockRetry while
// it is taken; EWOULDBLOCK after that means a run holds it.
func flockRetrying(f *os.File) error {
	deadline := time.Now().Add(lockRetry)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EWOULDBLOCK) || !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}
