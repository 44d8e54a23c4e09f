package mvcc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// readView opens a pebble snapshot and returns it with the revision it holds.
// A seqlock on commitSeq (odd while a group is being committed and
// published) proves no commit happened between loading the revision and
// taking the snapshot; a reader that meets a commit waits for it to end
// (committed), then tries again.
//
// Invariant: a reader never sees a revision before it is durable. pebble
// makes a batch visible to new snapshots before its WAL sync returns
// (commitPipeline.publish runs before the sync wait), so a snapshot taken
// during a commit may hold a revision a crash would lose — and a later
// write would then reuse its number for other data. Reading m/rev from such
// a snapshot (this function's fallback until 2026-12-03) could hand that
// revision out; waiting costs a reader at most one group's fsync.
func (s *Store) readView() (*pebble.Snapshot, int64, error) {
	for {
		if s.restoring.Load() {
			return nil, 0, ErrRestoring
		}
		seq := s.commitSeq.Load()
		if seq&1 == 1 {
			if ch := s.committed.Load(); ch != nil {
				<-*ch
			}
			continue
		}
		rev := s.rev.Load()
		snap := s.db.NewSnapshot()
		if s.commitSeq.Load() == seq {
			return snap, rev, nil
		}
		snap.Close()
	}
}

// Range serves an etcd RangeRequest: key alone is one key; range_end "\x00"
// means every key >= key; otherwise [key, range_end). Revision 0 reads the
// current revision; a revision above it returns ErrFutureRev and one below the
// compacted revision ErrCompacted. The response's Header.Revision is the
// store's revision at the time of the read (not the requested one), as etcd.
func (s *Store) Range(ctx context.Context, req *pb.RangeRequest) (*pb.RangeResponse, error) {
	return s.rangeTo(req, nil)
}

// RangeTo serves req as Range does, but adds its key-values to sink, in
// the response's order, instead of returning them in Kvs; the response
// carries the rest (header, count, more).
func (s *Store) RangeTo(ctx context.Context, req *pb.RangeRequest, sink KVSink) (*pb.RangeResponse, error) {
	return s.rangeTo(req, sink)
}

// rangeTo is Range with the key-values in the response (sink nil) or added
// to sink.
func (s *Store) rangeTo(req *pb.RangeRequest, sink KVSink) (*pb.RangeResponse, error) {
	if resp, ok, err := s.rangeLatest(req, sink); ok {
		return resp, err
	}
	if sink != nil {
		sink.Reset() // what a failed read of the latest revision added
	}
	snap, rev, err := s.readView()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	return s.rangeInto(snap, s.idx.viewAt(rev), rev, req, sink)
}

// rangeLatest serves a read of the current revision (req.Revision 0)
// without a pebble snapshot, from the published index view: its keys and
// metadata at the view's revision R, and the values from the history
// entries they name, read from the live database. A history entry, once
// written, never changes, so those values are R's whatever was written
// since; and R is durable (the view is published after its commit). The
// one thing that can happen meanwhile is a compaction past a newer write of
// a key removing the entry R names: the read then finds it missing and
// reports !ok, and Range answers from a snapshot instead. A snapshot costs
// pebble's mutex twice per read and, at its close, a compaction check
// (profiled: range@64).
func (s *Store) rangeLatest(req *pb.RangeRequest, sink KVSink) (*pb.RangeResponse, bool, error) {
	if req.Revision != 0 || s.restoring.Load() {
		return nil, false, nil
	}
	iv := s.idx.latest()
	if iv == nil {
		return nil, false, nil
	}
	resp, err := s.rangeInto(s.db, iv, iv.rev, req, sink)
	if errors.Is(err, errNoHistoryEntry) {
		return nil, false, nil
	}
	return resp, true, err
}

// rangeReader serves req from r, a consistent view whose revision is cur.
// iv is the index of live keys at cur, or nil if none is at hand.
func (s *Store) rangeReader(r pebble.Reader, iv *indexView, cur int64, req *pb.RangeRequest) (*pb.RangeResponse, error) {
	return s.rangeInto(r, iv, cur, req, nil)
}

// rangeInto is rangeReader with the key-values in the response (sink nil)
// or added to sink. A range in key order without revision filters goes to
// the sink as it is read; the others are collected, filtered and sorted
// first.
func (s *Store) rangeInto(r pebble.Reader, iv *indexView, cur int64, req *pb.RangeRequest, sink KVSink) (*pb.RangeResponse, error) {
	rev, err := s.checkRev(req.Revision, cur)
	if err != nil {
		return nil, err
	}
	sortOrder := req.SortOrder
	if sortOrder == pb.RangeRequest_NONE && req.SortTarget != pb.RangeRequest_KEY {
		sortOrder = pb.RangeRequest_ASCEND
	}
	if req.SortTarget == pb.RangeRequest_KEY && sortOrder == pb.RangeRequest_ASCEND {
		sortOrder = pb.RangeRequest_NONE // already in key order
	}
	filtered := req.MinModRevision != 0 || req.MaxModRevision != 0 ||
		req.MinCreateRevision != 0 || req.MaxCreateRevision != 0
	limit := req.Limit
	if sortOrder != pb.RangeRequest_NONE || filtered {
		limit = 0
	}
	if limit > 0 {
		limit++ // one more to learn whether there are more
	}
	sp := scanSpec{key: req.Key, end: req.RangeEnd, rev: rev, cur: cur, limit: limit,
		keysOnly: req.KeysOnly, countOnly: req.CountOnly, index: iv}
	resp := &pb.RangeResponse{Header: &pb.ResponseHeader{Revision: cur}}
	if sink != nil && sortOrder == pb.RangeRequest_NONE && !filtered {
		w := &sinkWriter{sink: sink, max: -1}
		if req.Limit > 0 {
			w.max = req.Limit
		}
		if resp.Count, err = s.scanTo(r, sp, w); err != nil {
			return nil, err
		}
		resp.More = req.Limit > 0 && w.n > req.Limit
		return resp, nil
	}
	kvs, count, err := s.scan(r, sp)
	if err != nil {
		return nil, err
	}
	if filtered {
		kvs = filterKVs(kvs, req)
	}
	sortKVs(kvs, sortOrder, req.SortTarget)
	resp.Count = count
	if req.Limit > 0 && int64(len(kvs)) > req.Limit {
		kvs = kvs[:req.Limit]
		resp.More = true
	}
	switch {
	case req.CountOnly:
	case sink != nil:
		w := sinkWriter{sink: sink, max: -1}
		for _, kv := range kvs {
			w.addKV(kv)
		}
	default:
		resp.Kvs = kvs
	}
	return resp, nil
}

func (s *Store) checkRev(want, cur int64) (int64, error) {
	if want <= 0 {
		return cur, nil
	}
	if want > cur {
		return 0, ErrFutureRev
	}
	if want < s.compacted.Load() {
		return 0, ErrCompacted
	}
	return want, nil
}

// scanSpec is what scan reads: up to limit (0: all) key-values of the etcd
// range [key, end) as of rev, in a view whose current revision is cur (at
// cur the live keyspace is read, below it the history). index, when set, is
// the index of live keys at cur.
type scanSpec struct {
	key, end            []byte
	rev, cur, limit     int64
	keysOnly, countOnly bool
	index               *indexView
	// stop ends the scan once limit key-values are read (count is then
	// not the range's).
	stop bool
}

// errStopScan ends a scan early (not an error).
var errStopScan = errors.New("mvcc: scan stopped")

// scan returns the key-values sp asks for and the number of keys in the
// range (scanTo, collected as KeyValues).
func (s *Store) scan(r pebble.Reader, sp scanSpec) ([]*mvccpb.KeyValue, int64, error) {
	var l kvList
	count, err := s.scanTo(r, sp, &l)
	return l.kvs, count, err
}

// scanTo adds the key-values sp asks for to out and returns the number of
// keys in the range. With an index, the count comes from it: at the
// current revision directly, so a count-only range reads no values and a
// range with a limit reads only the key-values it returns; below it from
// the current state and the changes since (rangeAt), which reads each
// changed key's history once.
func (s *Store) scanTo(r pebble.Reader, sp scanSpec, out kvSink) (int64, error) {
	live := sp.rev == sp.cur
	if live && sp.index != nil && !sp.stop && (sp.countOnly || sp.limit > 0) {
		count := sp.index.count(sp.key, sp.end)
		if sp.countOnly || count == 0 {
			return count, nil
		}
		_, err := s.scanTo(r, scanSpec{key: sp.key, end: sp.end, rev: sp.rev, cur: sp.cur, limit: sp.limit, keysOnly: sp.keysOnly, index: sp.index, stop: true}, out)
		return count, err
	}
	if !live && !sp.stop {
		if count, ok, err := s.rangeAt(r, sp, out); err != nil || ok {
			return count, err
		}
	}
	var count int64
	emit := func(e *entry) error {
		if sp.stop && int64(out.len()) >= sp.limit {
			return errStopScan
		}
		count++
		if sp.countOnly || (sp.limit > 0 && int64(out.len()) >= sp.limit) {
			return nil
		}
		if e.typ != recordPut {
			return fmt.Errorf("decode %q: %w", e.key, errBadRecord)
		}
		out.add(e, sp.keysOnly)
		return nil
	}
	var err error
	values := !sp.keysOnly && !sp.countOnly
	if live {
		err = scanLive(r, sp.index, sp.key, sp.end, values, emit)
	} else {
		err = scanHistory(r, sp.key, sp.end, sp.rev, values, emit)
	}
	if errors.Is(err, errStopScan) {
		err = nil
	}
	return count, err
}

// newBoundedIter opens an iterator of r over [lower, upper), or returns nil
// when the interval is empty.
func newBoundedIter(r pebble.Reader, lower, upper []byte) (*pebble.Iterator, error) {
	if bytes.Compare(lower, upper) >= 0 {
		return nil, nil
	}
	return r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
}

// historyBounds returns the h/ iteration bounds for an etcd key range.
func historyBounds(key, end []byte) (lower, upper []byte) {
	lower = escapeBound([]byte{prefixHistory}, key)
	switch {
	case len(end) == 0:
		upper = prefixEnd(historyPrefix(key))
	case len(end) == 1 && end[0] == 0:
		upper = []byte{prefixHistory + 1}
	default:
		upper = escapeBound([]byte{prefixHistory}, end)
	}
	return lower, upper
}

// scanHistory calls emit, in key order, for the newest entry at or below rev
// of every key in [key, end) whose newest entry is a put; with values set,
// each with its value.
func scanHistory(r pebble.Reader, key, end []byte, rev int64, values bool, emit entryFunc) error {
	lower, upper := historyBounds(key, end)
	it, err := newBoundedIter(r, lower, upper)
	if err != nil || it == nil {
		return err
	}
	defer it.Close()
	revSuffix := putInt64(int64(^uint64(rev)))
	ok := it.First()
	for ok {
		k, prefix, entryRev, err := decodeHistoryKey(it.Key())
		if err != nil {
			return err
		}
		if entryRev > rev {
			// Jump to this key's newest entry at or below rev.
			ok = it.SeekGE(append(append([]byte(nil), prefix...), revSuffix...))
			if ok && !bytes.HasPrefix(it.Key(), prefix) {
				continue // no entry at or below rev: next key
			}
			if !ok {
				break
			}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if len(v) > 0 && v[0] == recordPut {
			var e entry
			if err := e.decode(k, v); err != nil {
				return err
			}
			e.keyOwned = true // decodeHistoryKey made it
			if values {
				if e.value, err = recordValue(v); err != nil {
					return fmt.Errorf("decode history of %q: %w", k, err)
				}
			}
			if err := emit(&e); err != nil {
				return err
			}
		}
		// Skip the older entries of this key.
		ok = it.Next()
		if ok && bytes.HasPrefix(it.Key(), prefix) {
			ok = it.SeekGE(append(append([]byte(nil), prefix...), 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF))
		}
	}
	return it.Error()
}

func filterKVs(kvs []*mvccpb.KeyValue, req *pb.RangeRequest) []*mvccpb.KeyValue {
	out := kvs[:0]
	for _, kv := range kvs {
		if req.MinModRevision > 0 && kv.ModRevision < req.MinModRevision {
			continue
		}
		if req.MaxModRevision > 0 && kv.ModRevision > req.MaxModRevision {
			continue
		}
		if req.MinCreateRevision > 0 && kv.CreateRevision < req.MinCreateRevision {
			continue
		}
		if req.MaxCreateRevision > 0 && kv.CreateRevision > req.MaxCreateRevision {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func sortKVs(kvs []*mvccpb.KeyValue, order pb.RangeRequest_SortOrder, target pb.RangeRequest_SortTarget) {
	if order == pb.RangeRequest_NONE {
		return
	}
	var less func(a, b *mvccpb.KeyValue) bool
	switch target {
	case pb.RangeRequest_KEY:
		less = func(a, b *mvccpb.KeyValue) bool { return bytes.Compare(a.Key, b.Key) < 0 }
	case pb.RangeRequest_VERSION:
		less = func(a, b *mvccpb.KeyValue) bool { return a.Version < b.Version }
	case pb.RangeRequest_CREATE:
		less = func(a, b *mvccpb.KeyValue) bool { return a.CreateRevision < b.CreateRevision }
	case pb.RangeRequest_MOD:
		less = func(a, b *mvccpb.KeyValue) bool { return a.ModRevision < b.ModRevision }
	case pb.RangeRequest_VALUE:
		less = func(a, b *mvccpb.KeyValue) bool { return bytes.Compare(a.Value, b.Value) < 0 }
	default:
		return
	}
	if order == pb.RangeRequest_DESCEND {
		sort.SliceStable(kvs, func(i, j int) bool { return less(kvs[j], kvs[i]) })
		return
	}
	sort.SliceStable(kvs, func(i, j int) bool { return less(kvs[i], kvs[j]) })
}
