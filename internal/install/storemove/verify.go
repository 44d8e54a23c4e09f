package storemove

import (
	"context"
	"fmt"
	"hash/crc32"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// Digest is what two stores must agree on at a revision: the number of keys
// and a CRC-32C over (key, value, create, mod, version, lease) in key order
// (mvcc.HashKeyValue).
type Digest struct {
	Revision int64
	Keys     int64
	Hash     uint32
}

func (d Digest) String() string {
	return fmt.Sprintf("%d keys, hash %08x at revision %d", d.Keys, d.Hash, d.Revision)
}

// EtcdDigest reads etcd at rev in pages of page keys (0: sized by bytes,
// pageSizer) and digests it.
func EtcdDigest(ctx context.Context, cli *clientv3.Client, rev int64, page int) (Digest, error) {
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	d := Digest{Revision: rev}
	p := newPager(cli, rev)
	p.sizer.fixed = page
	var buf []byte
	for !p.done {
		kvs, err := p.page(ctx)
		if err != nil {
			return d, fmt.Errorf("read etcd: %w", err)
		}
		for _, kv := range kvs {
			buf = mvcc.HashKeyValue(buf[:0], kv)
			h.Write(buf)
			d.Keys++
		}
	}
	d.Hash = h.Sum32()
	return d, nil
}

// StoreDigest digests the store at rev, in one pass.
func StoreDigest(ctx context.Context, st *mvcc.Store, rev int64) (Digest, error) {
	d, err := st.HashKV(ctx, rev)
	if err != nil {
		return Digest{}, fmt.Errorf("hash the store at revision %d: %w", rev, err)
	}
	return Digest{Revision: d.Revision, Keys: d.Keys, Hash: d.Hash}, nil
}
