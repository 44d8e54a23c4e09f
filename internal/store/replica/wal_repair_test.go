package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestRestartCutsOffATornWALTail: a member killed in the middle of a WAL
// write leaves a torn last record (the rest of the preallocated file is
// zeros). The restart cuts it off, as etcd does, and the member rejoins and
// catches up; it does not refuse to start (stage 2b's TestKillNine met this
// on 3 members).
func TestRestartCutsOffATornWALTail(t *testing.T) {
	ms := newTestCluster(t, 3)
	lead := waitLeader(t, ms)
	m := ms[(lead+1)%3]
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
