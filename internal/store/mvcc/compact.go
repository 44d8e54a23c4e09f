package mvcc

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Compact discards history below rev: afterwards Range below rev returns
// ErrCompacted and watches cannot start below it. The compacted revision is
// recorded durably before Compact returns; the space is reclaimed in the
// background (or before returning, when physical is set) in small batches,
// so writes and reads never stop for it.
func (s *Store) Compact(ctx context.Context, rev int64, physical bool) (int64, error) {
	resp, err := s.submit(ctx, &pb.InternalRaftRequest{Compaction: &pb.CompactionRequest{Revision: rev, Physical: physical}})
	if err != nil {
		return 0, err
	}
	if done := resp.(*compactResult).done; physical {
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

// compactResult is the response of an applied compaction: done yields the
// physical compaction's result once it has run.
type compactResult struct{ done chan error }

// applyCompaction records the compacted revision in the batch and, once the
// batch is committed, starts the physical compaction (each member reclaims
// its own space).
func (w *writeTxn) applyCompaction(req *pb.CompactionRequest) (*compactResult, error) {
	s, rev := w.s, req.Revision
	if rev > w.currentRev() {
		return nil, ErrFutureRev
	}
	if rev <= s.compacted.Load() || rev <= w.compacting {
		return nil, ErrCompacted
	}
	w.compacting = rev
	_ = w.b.Set(metaCompacted, putInt64(rev), nil)
	res := &compactResult{done: make(chan error, 1)}
	w.afterCommit = append(w.afterCommit, func() {
		s.compacted.Store(rev)
		s.compactWG.Add(1)
		go func() {
			defer s.compactWG.Done()
			err := s.physicalCompact(rev)
			if err != nil {
				s.log.Error("compaction failed; it will be retried by the next compaction", "rev", rev, "err", err)
			}
			res.done <- err
		}()
	})
	return res, nil
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
