package hamove

import (
	"fmt"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/server/v3/lease/leasepb"
	"google.golang.org/protobuf/proto"
)

// fullLeaseTTLs gives every lease of a restored etcd data dir its full
// TTL: the store's snapshot records the time each lease had left when it
// was taken, and etcd counts that time from its first election after the
// restore — seconds, in a restore that takes tens of seconds — so etcd
// would expire a lease the store still keeps alive before the replay
// reaches etcd and renews it (a divergence: seen twice on the cluster).
// With RemainingTTL 0 etcd gives the lease its TTL from the election on,
// as it does to every lease after any leader change; the store's own
// expiry, replayed as a revoke, still ends it.
func fullLeaseTTLs(dataDir string) (int, error) {
	path := filepath.Join(dataDir, "member", "snap", "db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return 0, fmt.Errorf("open the restored etcd db %s: %w", path, err)
	}
	defer db.Close()
	n := 0
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("lease"))
		if b == nil {
			return nil
		}
		type kv struct{ k, v []byte }
		var puts []kv
		err := b.ForEach(func(k, v []byte) error {
			var l leasepb.Lease
			if err := proto.Unmarshal(v, &l); err != nil {
				return fmt.Errorf("lease %x: %w", k, err)
			}
			if l.RemainingTTL == 0 {
				return nil
			}
			l.RemainingTTL = 0
			nv, err := proto.Marshal(&l)
			if err != nil {
				return err
			}
			puts = append(puts, kv{append([]byte(nil), k...), nv})
			return nil
		})
		if err != nil {
			return err
		}
		for _, p := range puts {
			if err := b.Put(p.k, p.v); err != nil {
				return err
			}
		}
		n = len(puts)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("give the restored etcd's leases their full TTL (%s): %w", path, err)
	}
	return n, nil
}
