package etcdrestore

import (
	"fmt"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/server/v3/lease/leasepb"
	"google.golang.org/protobuf/proto"
)

// RestoredLeaseGrace is the least time a restored lease has from etcd's
// first election after the restore: the replay must reach etcd and renew
// the lease within it. kube-apiserver's endpoint leases have a TTL of 15 s;
// on the CI cluster the replay reached the restored etcd 16.3 s after its
// election (its client in gRPC's reconnect back-off), and etcd expired
// them: revisions the store never made.
const RestoredLeaseGrace = 120

// RestoredLeaseTTLs sets the time every lease of a restored etcd data dir
// has from etcd's first election: the store's snapshot records the time
// each lease had left when it was taken, and etcd counts it from its
// election after the restore — seconds, in a restore that takes tens of
// seconds — so etcd would expire a lease the store still keeps alive before
// the replay reaches etcd and renews it (a divergence: seen twice on the
// cluster). A lease gets its full TTL (RemainingTTL 0, what etcd gives every
// lease after any leader change), or RestoredLeaseGrace if its TTL is
// shorter. The store's own expiry, replayed as a revoke, still ends a lease
// whose holder is gone. The cost: etcd 3.6 without lease checkpoints keeps
// that remaining time for the lease's life (a renewal and a new leader give
// it again), so a short-lived lease nobody renews after the cut-back
// outlives its TTL by up to RestoredLeaseGrace; kube-apiserver replaces its
// endpoint leases every minute.
func RestoredLeaseTTLs(dataDir string) (int, error) {
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
			want := int64(0)
			if l.TTL < RestoredLeaseGrace {
				want = RestoredLeaseGrace
			}
			if l.RemainingTTL == want {
				return nil
			}
			l.RemainingTTL = want
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
