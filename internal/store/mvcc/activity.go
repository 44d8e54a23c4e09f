package mvcc

import "time"

// Write activity: when the latest write reached the store. Work that may
// wait (reading a paginated list's next page ahead of its request, package
// etcdapi) asks WritesQuietFor and stays out of the way of writers that are
// arriving.
//
// Invariant: lastWrite is at least the time of every write submitted
// (submit) or applied from the raft log (ApplyEntries) before the call
// that reads it; it never goes back.

// noteWrite records that a write arrived now.
func (s *Store) noteWrite() {
	now := s.opts.Now().UnixNano()
	for {
		last := s.lastWrite.Load()
		if now <= last || s.lastWrite.CompareAndSwap(last, now) {
			return
		}
	}
}

// WritesQuietFor reports whether no write arrived in the last d. d ≤ 0 is
// always quiet.
func (s *Store) WritesQuietFor(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	return s.opts.Now().UnixNano()-s.lastWrite.Load() >= int64(d)
}
