package mvcc

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// A paged list reads every page after the first at the first page's
// revision (kube-apiserver does), and every page answers the number of keys
// in the rest of the range. Below the current revision the history answers:
// per key, a seek to its newest entry at or below the revision, and for the
// count every remaining key of the range — about n²/2p seeks for a list of n
// keys in pages of p. A list running while writes came in starved the
// writers (issue #15: 0.53× etcd's writes while a full LIST of 100,000 keys
// ran every 10 ms).
//
// A range at rev below the current revision cur is answered instead from
// the current state and the changes since: the event log after rev names
// every key written since (compaction removes only events below the
// compacted revision, and rev is at or above it). A key of the range not
// named there is at rev what it is now (its live entry; the index's count
// includes it); a key named there is read from the history at rev, once.
//
// Invariant: rangeAt's key-values and count equal the history scan's, or it
// reports !ok and the caller scans the history (more changes since rev than
// keys in the range: the scan is then the cheaper one).

// rangeAtMinChanges is how many changes rangeAt reads at least before it
// gives up for the history scan, however small the range.
const rangeAtMinChanges = 1024

// rangeAt answers sp (sp.rev < sp.cur, sp.index the index at cur, r a view
// at cur) from the current state and the changes since sp.rev.
// It adds the key-values to out only once it answers (ok).
func (s *Store) rangeAt(r pebble.Reader, sp scanSpec, out kvSink) (count int64, ok bool, err error) {
	if len(sp.end) == 0 || sp.rev >= sp.cur || sp.index == nil {
		return 0, false, nil
	}
	count = sp.index.count(sp.key, sp.end)
	changed, ok, err := changedSince(r, sp.key, sp.end, sp.rev, sp.cur, max(count, rangeAtMinChanges))
	if err != nil || !ok {
		return 0, false, err
	}
	// then: each changed key's entry at rev (nil: absent then).
	then := make(map[string]*mvccpb.KeyValue, len(changed))
	for _, k := range changed {
		kv, err := entryAt(r, []byte(k), sp.rev, sp.keysOnly)
		if err != nil {
			return 0, false, err
		}
		then[k] = kv
		now := sp.index.any([]byte(k), nil)
		switch {
		case now && kv == nil:
			count--
		case kv != nil && !now:
			count++
		}
	}
	if sp.countOnly || count == 0 {
		return count, true, nil
	}
	err = mergeAt(r, sp, changed, then, out)
	return count, err == nil, err
}

// mergeAt adds up to sp.limit (0: all) key-values of the range at sp.rev to
// out: the live entries of the keys not changed since, and then's entries
// of the changed ones (sorted), in key order.
func mergeAt(r pebble.Reader, sp scanSpec, changed []string, then map[string]*mvccpb.KeyValue, out kvSink) error {
	full := func() bool { return sp.limit > 0 && int64(out.len()) >= sp.limit }
	takeChanged := func(k string) {
		if kv := then[k]; kv != nil && !full() {
			out.addKV(kv)
		}
	}
	i := 0
	err := scanLive(r, sp.index, sp.key, sp.end, !sp.keysOnly, func(e *entry) error {
		k := e.key
		for i < len(changed) && changed[i] < string(k) && !full() {
			takeChanged(changed[i])
			i++
		}
		if full() {
			return errStopScan
		}
		if i < len(changed) && changed[i] == string(k) {
			takeChanged(changed[i]) // its entry at rev, not its live one
			i++
			return nil
		}
		if e.typ != recordPut {
			return fmt.Errorf("decode %q: %w", k, errBadRecord)
		}
		out.add(e, sp.keysOnly)
		return nil
	})
	if err != nil && err != errStopScan {
		return err
	}
	for ; i < len(changed) && !full(); i++ {
		takeChanged(changed[i])
	}
	return nil
}

// changedSince returns, sorted, the keys of the etcd range [key, end) (end
// non-empty) written in revisions (rev, cur]; !ok when more than budget
// changes were read.
func changedSince(r pebble.Reader, key, end []byte, rev, cur, budget int64) ([]string, bool, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: eventKey(rev+1, 0), UpperBound: eventKey(cur+1, 0)})
	if err != nil {
		return nil, false, err
	}
	defer it.Close()
	seen := map[string]struct{}{}
	var read int64
	for ok := it.First(); ok; ok = it.Next() {
		if read++; read > budget {
			return nil, false, nil
		}
		if k := it.Value(); inEtcdRange(k, key, end) {
			seen[string(k)] = struct{}{}
		}
	}
	if err := it.Error(); err != nil {
		return nil, false, err
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, true, nil
}

// inEtcdRange reports whether k is in the etcd range [key, end) (end
// non-empty; "\x00" means every key at or above key).
func inEtcdRange(k, key, end []byte) bool {
	if bytes.Compare(k, key) < 0 {
		return false
	}
	return len(end) == 1 && end[0] == 0 || bytes.Compare(k, end) < 0
}

// entryAt is key's key-value at rev (its newest history entry at or below
// rev, if a put), or nil if it did not exist then.
func entryAt(r pebble.Reader, key []byte, rev int64, keysOnly bool) (*mvccpb.KeyValue, error) {
	prefix := historyPrefix(key)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: historyKey(key, rev), UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	if !it.First() {
		return nil, it.Error()
	}
	v, err := it.ValueAndErr()
	if err != nil {
		return nil, err
	}
	if len(v) == 0 || v[0] != recordPut {
		return nil, nil
	}
	_, kv, err := decodeRecord(key, v, keysOnly)
	if err != nil {
		return nil, fmt.Errorf("decode %q at revision %d: %w", key, rev, err)
	}
	return kv, nil
}
