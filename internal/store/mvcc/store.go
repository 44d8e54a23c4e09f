package mvcc

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// FormatVersion is the on-disk format this code writes. A data dir with a
// newer format is refused rather than misread.
//
//	1  live entries (l/) hold metadata and value
//	2  live entries hold metadata only; a value is stored once, in the
//	   key's history entry at its mod revision (docs/adr/011)
//
// This code reads both (format 1 wrote every value to the history too); it
// raises a format-1 dir to 2 when it opens it, before it writes a live
// entry without its value, so an older binary refuses the dir instead of
// reading empty values.
const FormatVersion = 2

// formatMagic marks a pebble directory as a QuantyKube store.
const formatMagic = "quantykube-store"

// Options configure a Store.
type Options struct {
	// NoSync acknowledges writes before they reach the disk. Tests only: a
	// crash loses acknowledged writes.
	NoSync bool
	// MaxBatch bounds the number of requests committed with one fsync.
	MaxBatch int
	// CacheSize is the block cache for sstable blocks, in bytes
	// (DefaultCacheSize if 0). Pebble's memtables are reserved on top of it
	// (sizing.go).
	CacheSize int64
	// MemTableSize is the size of one pebble memtable, in bytes
	// (DefaultMemTableSize if 0); pebble holds up to three (sizing.go). Each
	// WAL file is preallocated to 110 % of it.
	MemTableSize int64
	// L0CompactionThreshold is the number of L0 sublevels at which pebble
	// compacts L0 (DefaultL0CompactionThreshold if 0; levels.go).
	L0CompactionThreshold int
	// MinLeaseTTL is the smallest TTL a granted lease gets, in seconds (etcd: 2).
	MinLeaseTTL int64
	// Logger receives the store's structured logs.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Replicated opens the store as the state machine of a raft member: no
	// local committer runs; writes are proposed through the Proposer set with
	// SetProposer and applied, in log order, by ApplyEntries. Applies are
	// not synced: the raft WAL is the durable log, and a restart replays it
	// from the applied index kept in the same batches (m/applied).
	Replicated bool
	// HoldLeases opens a store without a mode record with lease expiry held
	// (a restored snapshot about to become a mirror: package mirror).
	HoldLeases bool
}

func (o *Options) withDefaults() {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 2048
	}
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MemTableSize <= 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.L0CompactionThreshold <= 0 {
		o.L0CompactionThreshold = DefaultL0CompactionThreshold
	}
	o.L0CompactionThreshold = min(o.L0CompactionThreshold, MaxL0CompactionThreshold)
	if o.MinLeaseTTL <= 0 {
		o.MinLeaseTTL = 2
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Store is the multi-version key-value store. All methods are safe for
// concurrent use. Writes go through one committer goroutine (see commit.go);
// reads run concurrently on pebble snapshots.
type Store struct {
	db   *pebble.DB
	opts Options
	log  *slog.Logger
	dir  string

	// rev is the newest committed (durable and visible) main revision.
	rev atomic.Int64
	// compacted is the compacted revision; history below it is gone.
	compacted atomic.Int64
	// commitSeq is odd while a batch that changes m/rev is being committed
	// and its revision published (a seqlock for readView); committed is
	// closed when it turns even again (see beginCommit).
	commitSeq atomic.Int64
	committed atomic.Pointer[chan struct{}]
	// afterBatchCommit, when set (tests only), runs after a group's batch
	// is committed to pebble and before its revision is published: the
	// window in which pebble already shows the batch to new snapshots.
	afterBatchCommit func()

	// lastWrite is when the latest write arrived, in Unix nanoseconds
	// (activity.go).
	lastWrite atomic.Int64

	queue   chan *writeRequest
	stopc   chan struct{}
	donec   chan struct{}
	closing sync.Once
	failed  atomic.Pointer[error]

	lessor *lessor
	hub    *hub
	// idx is the in-memory index of live keys (index.go).
	idx *liveIndex

	// proposer replicates writes when the store is a raft member.
	proposer atomic.Pointer[Proposer]
	// applied is the raft index and term of the last applied entry (0 for a
	// single store); members is the cluster membership (replica package).
	applyMu sync.Mutex
	applied AppliedIndex
	// restoring is set while RestoreState replaces the data (reads refused).
	restoring atomic.Bool
	// removed holds the ids of members removed from the cluster (c/r/).
	removed sync.Map

	compactMu sync.Mutex // one physical compaction at a time
	compactWG sync.WaitGroup

	// exportMu is read-held by every open Export; Close takes it to wait
	// for them (they stop early once stopc is closed).
	exportMu sync.RWMutex

	// ext is the mode (package mirror), its observers and revision waiters
	// (extension.go, revwait.go).
	ext extState
}

// Open opens (or creates) the store in dir. It refuses a directory that holds
// something else than a QuantyKube store, or a store written by a newer
// version, without changing anything in it.
func Open(dir string, opts Options) (*Store, error) {
	opts.withDefaults()
	if err := checkDataDir(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir %s: %w", dir, err)
	}
	popts := &pebble.Options{
		Logger:             quietLogger{opts.Logger},
		FormatMajorVersion: pebble.FormatNewest,
	}
	defer pebbleMemoryOptions(popts, opts).Unref()
	pebbleTableOptions(popts)
	pebbleLevelOptions(popts, opts)
	db, err := pebble.Open(dir, popts)
	if err != nil {
		return nil, fmt.Errorf("open data dir %s: %w (if the dir is damaged, restore it from a backup or move it away and re-import)", dir, err)
	}
	s := &Store{
		db:    db,
		opts:  opts,
		log:   opts.Logger,
		dir:   dir,
		queue: make(chan *writeRequest, 4*opts.MaxBatch),
		stopc: make(chan struct{}),
		donec: make(chan struct{}),
	}
	if err := s.loadMeta(); err != nil {
		db.Close()
		return nil, err
	}
	s.idx = newLiveIndex()
	if err := s.idx.rebuild(db, s.Rev()); err != nil {
		db.Close()
		return nil, err
	}
	s.hub = newHub(s)
	s.lessor = newLessor(s)
	if err := s.lessor.load(); err != nil {
		db.Close()
		return nil, err
	}
	if opts.Replicated {
		close(s.donec) // no local committer
	} else {
		go s.commitLoop()
	}
	go s.lessor.expiryLoop()
	go s.hub.syncLoop()
	return s, nil
}

// checkDataDir refuses a directory that is neither empty, nor absent, nor a
// pebble store (for example an etcd data dir), before pebble touches it.
func checkDataDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read data dir %s: %w (check the path and its permissions)", dir, err)
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "member")); err == nil {
		return fmt.Errorf("data dir %s holds an etcd member, not a QuantyKube store; pass an empty or new --data-dir", dir)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	if len(matches) == 0 {
		return fmt.Errorf("data dir %s is not empty and holds no QuantyKube store; pass an empty or new --data-dir", dir)
	}
	return nil
}

func (s *Store) loadMeta() error {
	magic, err := s.get(s.db, metaFormat)
	if err != nil {
		return err
	}
	if magic == nil {
		// A new store: revision 1, nothing compacted.
		b := s.db.NewBatch()
		_ = b.Set(metaFormat, append([]byte(formatMagic), byte(FormatVersion)), nil)
		_ = b.Set(metaRev, putInt64(1), nil)
		_ = b.Set(metaCompacted, putInt64(0), nil)
		if err := b.Commit(pebble.Sync); err != nil {
			return fmt.Errorf("initialise store: %w", err)
		}
		s.rev.Store(1)
		return nil
	}
	if len(magic) != len(formatMagic)+1 || string(magic[:len(formatMagic)]) != formatMagic {
		return fmt.Errorf("data dir %s holds a pebble database that is not a QuantyKube store; pass an empty or new --data-dir", s.dir)
	}
	v := int(magic[len(formatMagic)])
	if v > FormatVersion {
		return fmt.Errorf("data dir %s has store format %d, newer than this binary's %d; run a newer quantykube", s.dir, v, FormatVersion)
	}
	if v < FormatVersion {
		if err := s.db.Set(metaFormat, append([]byte(formatMagic), byte(FormatVersion)), pebble.Sync); err != nil {
			return fmt.Errorf("raise the store format of %s from %d to %d: %w", s.dir, v, FormatVersion, err)
		}
	}
	rev, err := s.getInt(s.db, metaRev)
	if err != nil {
		return err
	}
	compacted, err := s.getInt(s.db, metaCompacted)
	if err != nil {
		return err
	}
	s.rev.Store(rev)
	s.compacted.Store(compacted)
	return s.loadApplied(s.db)
}

// get reads key from r (a DB, snapshot or indexed batch) and copies the value;
// nil means absent.
func (s *Store) get(r pebble.Reader, key []byte) ([]byte, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", key, err)
	}
	out := append([]byte(nil), v...)
	closer.Close()
	return out, nil
}

func (s *Store) getInt(r pebble.Reader, key []byte) (int64, error) {
	v, err := s.get(r, key)
	if err != nil {
		return 0, err
	}
	if v == nil {
		return 0, fmt.Errorf("store metadata %q missing; the data dir is damaged", key)
	}
	return getInt64(v)
}

// Rev returns the current (newest committed) revision.
func (s *Store) Rev() int64 { return s.rev.Load() }

// CompactedRev returns the compacted revision (0 if never compacted).
func (s *Store) CompactedRev() int64 { return s.compacted.Load() }

// Close stops the committer, the watchers and the lessor and closes pebble.
// Requests in flight get ErrClosed.
func (s *Store) Close() error {
	var err error
	s.closing.Do(func() {
		close(s.stopc)
		<-s.donec
		s.hub.close()
		if errp := s.failed.Load(); errp != nil {
			// The engine failed (a full disk): pebble may hold its locks;
			// the WAL has everything a restart needs.
			err = *errp
			return
		}
		s.compactWG.Wait()
		s.exportMu.Lock()
		err = s.db.Close()
	})
	return err
}

// Size returns the bytes pebble uses on disk, and an estimate of the bytes
// in use by data: every keyspace's tables (history not yet compacted
// included, as etcd's in-use size counts every revision), without the WAL
// and files waiting to be deleted.
func (s *Store) Size() (total, inUse int64) {
	m := s.db.Metrics()
	total = int64(m.DiskSpaceUsage())
	inUse = total
	if est, err := s.db.EstimateDiskUsage([]byte{0}, []byte{0xff}); err == nil {
		inUse = min(int64(est), total)
	}
	return total, inUse
}

type quietLogger struct{ l *slog.Logger }

func (q quietLogger) Infof(format string, args ...any)  {}
func (q quietLogger) Errorf(format string, args ...any) { q.l.Error(fmt.Sprintf(format, args...)) }
func (q quietLogger) Fatalf(format string, args ...any) {
	q.l.Error(fmt.Sprintf(format, args...))
	os.Exit(1)
}
