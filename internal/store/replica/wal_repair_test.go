package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// TestRestartCutsOffATornWALTail: a member killed in the middle of a WAL
// write leaves a torn last record (the rest of the preallocated file is
// zeros). The restart cuts it off, as etcd does, and the member rejoins and
// catches up; it does not refuse to start (stage 2b's TestKillNine met this
// on 3 members).
func TestRestartCutsOffATornWALTail(t *testing.T) {
	ms, lead, m := stoppedFollower(t)
	ctx := context.Background()
	tearLastRecord(t, m.cfg.walDir())
	m.start(t) // fails the test if the WAL is refused
	last, err := ms[lead].store.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("after")})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for m.store.Rev() < last.Header.Revision {
		if time.Now().After(deadline) {
			t.Fatalf("restarted member at revision %d after 20 s, want %d", m.store.Rev(), last.Header.Revision)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tearLastRecord appends to the newest WAL file what a write cut short by a
// kill leaves after the last record: the frame of a new record (its length)
// and the first bytes of its data, zeros after (the file is preallocated).
// The records before it are untouched: they were synced and may have been
// acknowledged.
func tearLastRecord(t *testing.T, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no WAL file in %s (%v)", dir, err)
	}
	path := files[len(files)-1]
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end := (len(bytes.TrimRight(b, "\x00")) + 7) / 8 * 8
	torn := binary.LittleEndian.AppendUint64(nil, 4000) // a 4,000-byte record's frame
	torn = append(torn, bytes.Repeat([]byte{0x5a}, 100)...)
	if end+len(torn)+4000 > len(b) {
		t.Fatalf("%s: no room after its records at %d of %d bytes", path, end, len(b))
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(torn, int64(end)); err != nil {
		t.Fatal(err)
	}
}

// TestRestartRefusesAWALCutBelowApplied: a member's WAL damaged in its
// middle so that a record's length runs past the file (what stage 1's
// TestClusterCorruptWAL met when its overwrite began on a frame) reads as a
// torn tail, and the repair cuts off every record after it — records that
// were synced and applied. The restart must refuse, naming the WAL, rather
// than serve a log that forgot appends it acknowledged.
func TestRestartRefusesAWALCutBelowApplied(t *testing.T) {
	_, _, m := stoppedFollower(t)
	lengthPastTheFile(t, m.cfg.walDir())

	st, err := mvcc.Open(m.cfg.DataDir, mvcc.Options{Replicated: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rep, err := Start(m.cfg, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		rep.Stop()
		t.Fatal("the member started on a WAL that lost applied entries")
	}
	if msg := err.Error(); !strings.Contains(msg, "raft WAL in") || !strings.Contains(msg, "cannot be used") || !strings.Contains(msg, "but the store applied entries up to") {
		t.Fatalf("refused with %q; want the WAL named, the applied index and what to do", msg)
	}
}

// lengthPastTheFile overwrites the length field of a record in the middle
// of the newest WAL file with one that runs past the file's end.
func lengthPastTheFile(t *testing.T, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no WAL file in %s (%v)", dir, err)
	}
	path := files[len(files)-1]
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var frames []int // offsets of the records' length fields
	for off := 0; off+8 <= len(b); {
		field := binary.LittleEndian.Uint64(b[off:])
		if field == 0 {
			break
		}
		size := int(field &^ (0xff << 56))
		pad := 0
		if field>>63 == 1 {
			pad = int(field>>56) & 0x7
		}
		frames = append(frames, off)
		off += 8 + size + pad
	}
	if len(frames) < 10 {
		t.Fatalf("%s: %d records; want at least 10", path, len(frames))
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(binary.LittleEndian.AppendUint64(nil, 1<<40), int64(frames[len(frames)/2])); err != nil {
		t.Fatal(err)
	}
}

// stoppedFollower starts 3 members, writes 20 values of 4 KiB through the
// leader, and stops a follower once it applied them all: its WAL holds
// synced, applied records.
func stoppedFollower(t *testing.T) (ms []*testMember, lead int, m *testMember) {
	t.Helper()
	ms = newTestCluster(t, 3)
	lead = waitLeader(t, ms)
	m = ms[(lead+1)%3]
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		if _, err := ms[lead].store.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: bytes.Repeat([]byte{'v'}, 4096)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.rep.ReadBarrier(ctx); err != nil {
		t.Fatal(err)
	}
	m.stop()
	return ms, lead, m
}
