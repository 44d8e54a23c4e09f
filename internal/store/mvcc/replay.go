package mvcc

import "fmt"

// applyReplay applies a replay batch (see ReplayBatch). Everything that can
// refuse the whole batch is checked before anything is written: the
// revisions must follow the store's, one after the other. A transaction
// that then fails stops the batch; those before it stay applied (they are
// complete revisions) and their events are delivered.
func (w *writeTxn) applyReplay(b *ReplayBatch) (int64, error) {
	if _, f := w.modeAt(); len(b.Txns) > 0 && f&flagAcceptReplay == 0 {
		return 0, ErrNotReplaying
	}
	next := w.currentRev() + 1
	for _, t := range b.Txns {
		if t.Rev != next || t.Txn == nil {
			return 0, fmt.Errorf("%w: revision %d offered, the store is at %d", ErrReplayOrder, t.Rev, next-1)
		}
		next++
	}
	l := w.s.lessor
	for _, g := range b.Grants {
		if g.ID != 0 && !l.exists(g.ID) {
			if err := w.grant(g.ID, g.TTL); err != nil {
				return 0, fmt.Errorf("replay: grant lease %x: %w", g.ID, err)
			}
		}
	}
	var events []Event
	defer func() {
		// The caller delivers w.events when w.changes is set: every
		// transaction's events, not only the last one's.
		w.events, w.changes = events, int64(len(events))
	}()
	for _, t := range b.Txns {
		w.begin()
		resp, err := w.applyWriteTxn(t.Txn)
		if err != nil {
			return w.currentRev(), fmt.Errorf("replay revision %d: %w", t.Rev, err)
		}
		events = append(events, w.events...)
		if !resp.Succeeded || w.currentRev() != t.Rev {
			return w.currentRev(), fmt.Errorf("%w: revision %d found another state than the source had before it (the store is at %d)", ErrReplayDiverged, t.Rev, w.currentRev())
		}
	}
	for _, id := range b.Revokes {
		l.mu.Lock()
		ls := l.leases[id]
		keyless := ls != nil && len(ls.keys) == 0
		l.mu.Unlock()
		if keyless {
			if err := w.revoke(id); err != nil {
				return w.currentRev(), fmt.Errorf("replay: revoke lease %x: %w", id, err)
			}
		}
	}
	return w.currentRev(), nil
}
