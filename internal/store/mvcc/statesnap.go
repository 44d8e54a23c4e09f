package mvcc

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"

	"github.com/cockroachdb/pebble/v2"
)

// stateMagic starts a state snapshot: the whole keyspace of a store as
// (key, value) records, then a CRC-32C of everything before it.
const stateMagic = "quantykube-state-1\n"

// ErrRestoring is returned by reads while a member installs a state snapshot.
var ErrRestoring = errors.New("mvcc: member is installing a snapshot of the cluster's state; retry on another member")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// WriteState writes the store's whole state, as of one pebble snapshot, to w,
// and returns the applied index and raft ConfState that state includes. A
// member that is new or too far behind installs it with RestoreState (raft's
// snapshot path).
func (s *Store) WriteState(w io.Writer) (AppliedIndex, []byte, error) {
	snap := s.db.NewSnapshot()
	defer snap.Close()
	at, confState, err := s.stateInfo(snap)
	if err != nil {
		return at, nil, err
	}
	return at, confState, s.writeState(snap, w)
}

func (s *Store) stateInfo(r pebble.Reader) (AppliedIndex, []byte, error) {
	var at AppliedIndex
	v, err := s.get(r, metaApplied)
	if err != nil {
		return at, nil, err
	}
	if len(v) == 16 {
		at = AppliedIndex{Index: binary.BigEndian.Uint64(v), Term: binary.BigEndian.Uint64(v[8:])}
	}
	cs, err := s.get(r, metaConfState)
	return at, cs, err
}

func (s *Store) writeState(snap *pebble.Snapshot, w io.Writer) error {
	it, err := snap.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	h := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 1<<20)
	if _, err := bw.WriteString(stateMagic); err != nil {
		return err
	}
	var hdr []byte
	for ok := it.First(); ok; ok = it.Next() {
		k, v := it.Key(), it.Value()
		hdr = binary.AppendUvarint(hdr[:0], uint64(len(k)))
		hdr = binary.AppendUvarint(hdr, uint64(len(v)))
		for _, p := range [][]byte{hdr, k, v} {
			if _, err := bw.Write(p); err != nil {
				return fmt.Errorf("write state: %w", err)
			}
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("read state: %w", err)
	}
	if _, err := bw.Write([]byte{0, 0}); err != nil { // end: empty key and value
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err = w.Write(binary.BigEndian.AppendUint32(nil, h.Sum32()))
	return err
}

// RestoreState replaces the store's whole state with a state snapshot from
// r. The replacement is marked (m/restoring) before anything is deleted and
// unmarked in the last, synced batch: a crash in between leaves the mark, and
// the member installs the snapshot again before it serves. Readers get
// ErrRestoring meanwhile. Watchers stay and catch up from the new state.
func (s *Store) RestoreState(r io.Reader) (AppliedIndex, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.restoring.Store(true)
	defer s.restoring.Store(false)
	if err := s.replaceState(r); err != nil {
		return AppliedIndex{}, err
	}
	if err := s.loadMeta(); err != nil {
		return AppliedIndex{}, err
	}
	if err := s.idx.rebuild(s.db, s.Rev()); err != nil {
		return AppliedIndex{}, err
	}
	if err := s.lessor.reload(); err != nil {
		return AppliedIndex{}, err
	}
	s.hub.restored(s.Rev())
	s.ext.revs.trigger(s.Rev())
	return s.applied, nil
}

func (s *Store) replaceState(r io.Reader) error {
	sr := &sumReader{br: bufio.NewReaderSize(r, 1<<20), h: crc32.New(castagnoli)}
	magic := make([]byte, len(stateMagic))
	if _, err := io.ReadFull(sr, magic); err != nil || string(magic) != stateMagic {
		return fmt.Errorf("state snapshot: bad header (%v)", err)
	}
	b := s.db.NewBatch()
	_ = b.DeleteRange([]byte{0}, []byte{0xff, 0xff, 0xff, 0xff}, nil)
	_ = b.Set(metaRestoring, []byte{1}, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("state snapshot: clear store: %w", err)
	}
	b = s.db.NewBatch()
	defer func() { b.Close() }()
	for {
		klen, err := binary.ReadUvarint(sr)
		if err != nil {
			return fmt.Errorf("state snapshot: truncated: %w", err)
		}
		vlen, err := binary.ReadUvarint(sr)
		if err != nil {
			return fmt.Errorf("state snapshot: truncated: %w", err)
		}
		if klen == 0 {
			break
		}
		kv := make([]byte, klen+vlen)
		if _, err := io.ReadFull(sr, kv); err != nil {
			return fmt.Errorf("state snapshot: truncated: %w", err)
		}
		_ = b.Set(kv[:klen], kv[klen:], nil)
		if b.Len() > 4<<20 {
			if err := b.Commit(pebble.NoSync); err != nil {
				return fmt.Errorf("state snapshot: write: %w", err)
			}
			b = s.db.NewBatch()
		}
	}
	sum := make([]byte, 4)
	if _, err := io.ReadFull(sr.br, sum); err != nil {
		return fmt.Errorf("state snapshot: truncated checksum: %w", err)
	}
	if binary.BigEndian.Uint32(sum) != sr.h.Sum32() {
		return errors.New("state snapshot: checksum mismatch; the snapshot was damaged in transit")
	}
	_ = b.Delete(metaRestoring, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("state snapshot: write: %w", err)
	}
	return nil
}

// sumReader hashes what is consumed from br (not what br reads ahead).
type sumReader struct {
	br *bufio.Reader
	h  hash.Hash32
}

func (r *sumReader) Read(p []byte) (int, error) {
	n, err := r.br.Read(p)
	r.h.Write(p[:n])
	return n, err
}

func (r *sumReader) ReadByte() (byte, error) {
	c, err := r.br.ReadByte()
	if err == nil {
		r.h.Write([]byte{c})
	}
	return c, err
}

// Sync makes every applied batch durable (they are committed unsynced on a
// replicated member).
func (s *Store) Sync() error { return s.db.LogData(nil, pebble.Sync) }
