package etcdrestore

import (
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/server/v3/lease/leasepb"
	"google.golang.org/protobuf/proto"
)

// TestRestoredLeaseTTLs: a short lease gets RestoredLeaseGrace from etcd's
// election, a long one its full TTL, whatever time the snapshot recorded.
func TestRestoredLeaseTTLs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "member", "snap", "db")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	leases := map[string]*leasepb.Lease{"a": {ID: 1, TTL: 15, RemainingTTL: 3}, "b": {ID: 2, TTL: 3600, RemainingTTL: 100}}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("lease"))
		if err != nil {
			return err
		}
		for k, l := range leases {
			v, _ := proto.Marshal(l)
			if err := b.Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := RestoredLeaseTTLs(dir); err != nil || n != 2 {
		t.Fatalf("RestoredLeaseTTLs: %d leases changed, %v; want 2, nil", n, err)
	}
	db, err = bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want := map[string]int64{"a": RestoredLeaseGrace, "b": 0}
	_ = db.View(func(tx *bolt.Tx) error {
		for k, w := range want {
			var l leasepb.Lease
			if err := proto.Unmarshal(tx.Bucket([]byte("lease")).Get([]byte(k)), &l); err != nil {
				t.Fatal(err)
			}
			if l.RemainingTTL != w {
				t.Errorf("lease %d (TTL %d): RemainingTTL %d, want %d", l.ID, l.TTL, l.RemainingTTL, w)
			}
		}
		return nil
	})
}
