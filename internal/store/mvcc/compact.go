package mvcc

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Compact discards history below rev: afterwards Range below rev returns
// ErrCompacted and watches cannot start below it. The compacted revision is
// recorded durably before Compact returns; the space is reclaimed in the
// background (or before returning, when physical is set) in small batches,
// so writes and reads never stop for it.
func (s *Store) Compact(ctx context.Context, rev int64, physical bool) (int64, error) {
	_, err := s.write(ctx, func(w *writeTxn) (any, error) {
		if rev > w.currentRev() {
			return nil, ErrFutureRev
		}
		if rev <= s.compacted.Load() {
			return nil, ErrCompacted
		}
		_ = w.b.Set(metaCompacted, putInt64(rev), nil)
		w.afterCommit = append(w.afterCommit, func() { s.compacted.Store(rev) })
		return nil, nil
	})
	if err != nil {
		return 0, err
	}
	s.compactWG.Add(1)
	done := make(chan error, 1)
	go func() {
		defer s.compactWG.Done()
		err := s.physicalCompact(rev)
		if err != nil {
			s.log.Error("compaction failed; it will be retried by the next compaction", "rev", rev, "err", err)
		}
		done <- err
	}()
	if physical {
		select {
		case err := <-done:
			if err != nil {
				return 0, err
			}
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return s.Rev(), nil
}

// physicalCompact deletes the history entries that no read at or above rev
// can reach: for every key, each entry older than its newest entry at or
// below rev, and that newest entry too when it is a delete below rev. Event
// log entries below rev go as well.
func (s *Store) physicalCompact(rev int64) error {
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	if err := s.db.DeleteRange(eventKey(0, 0), eventKey(rev, 0), pebble.NoSync); err != nil {
		return fmt.Errorf("compact event log to %d: %w", rev, err)
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixHistory}, UpperBound: []byte{prefixHistory + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	batch := s.db.NewBatch()
	var (
		curPrefix []byte
		kept      bool // the newest entry <= rev of curPrefix was seen
	)
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) < 11 {
			continue
		}
		prefix := k[:len(k)-8]
		if !bytes.Equal(prefix, curPrefix) {
			curPrefix = append(curPrefix[:0], prefix...)
			kept = false
		}
		_, _, entryRev, err := decodeHistoryKey(k)
		if err != nil {
			return err
		}
		if entryRev > rev {
			continue
		}
		if !kept {
			kept = true
			v := it.Value()
			if len(v) > 0 && v[0] == recordDelete && entryRev < rev {
				_ = batch.Delete(k, nil)
			}
		} else {
			_ = batch.Delete(k, nil)
		}
		if batch.Len() > 1<<20 {
			if err := batch.Commit(pebble.NoSync); err != nil {
				return err
			}
			batch = s.db.NewBatch()
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	if err := batch.Commit(pebble.Sync); err != nil {
		return err
	}
	// Let pebble drop the deleted data from its files now rather than later.
	return s.db.Compact(context.Background(), []byte{prefixEvent}, []byte{prefixHistory + 1}, false)
}
