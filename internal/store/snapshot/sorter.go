package snapshot

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// baseSorter puts the keys live at the compacted revision, which the store
// reads in key order, into revision order, as etcd's key bucket wants them.
// The entries spill to a temporary pebble database (no WAL, small memtable),
// so memory stays bounded whatever the number of keys. The sort key is the
// mod_revision then the key; within one revision, sub-revisions are numbered
// from 0 in that order.
type baseSorter struct {
	db *pebble.DB
	b  *pebble.Batch
	n  int64
}

func newBaseSorter(dir string, log *slog.Logger) (*baseSorter, error) {
	cache := pebble.NewCache(8 << 20)
	defer cache.Unref()
	db, err := pebble.Open(dir, &pebble.Options{
		Cache:        cache,
		MemTableSize: 16 << 20,
		DisableWAL:   true,
		Logger:       quietLogger{log},
	})
	if err != nil {
		return nil, fmt.Errorf("open sort space %s: %w", dir, err)
	}
	return &baseSorter{db: db, b: db.NewBatch()}, nil
}

func (s *baseSorter) add(kv *mvccpb.KeyValue) error {
	v, err := proto.Marshal(kv)
	if err != nil {
		return fmt.Errorf("encode %q: %w", kv.Key, err)
	}
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(kv.Key)), uint64(kv.ModRevision))
	_ = s.b.Set(append(k, kv.Key...), v, nil)
	s.n++
	if s.b.Len() < 4<<20 {
		return nil
	}
	return s.flush()
}

func (s *baseSorter) flush() error {
	if err := s.b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("sort: write: %w", err)
	}
	_ = s.b.Close()
	s.b = s.db.NewBatch()
	return nil
}

// each calls fn with every entry in (revision, key) order, with its
// sub-revision, and the encoded mvccpb.KeyValue.
func (s *baseSorter) each(ctx context.Context, fn func(main, sub int64, value []byte) error) error {
	if err := s.flush(); err != nil {
		return err
	}
	it, err := s.db.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	var main, sub int64
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		rev := int64(binary.BigEndian.Uint64(it.Key()[:8]))
		if rev != main {
			main, sub = rev, 0
		} else {
			sub++
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if err := fn(main, sub, v); err != nil {
			return err
		}
	}
	return it.Error()
}

func (s *baseSorter) close() error {
	_ = s.b.Close()
	return s.db.Close()
}

// quietLogger drops pebble's informational lines and keeps its errors.
type quietLogger struct{ l *slog.Logger }

func (q quietLogger) Infof(format string, args ...any)  {}
func (q quietLogger) Errorf(format string, args ...any) { q.l.Error(fmt.Sprintf(format, args...)) }
func (q quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
