package mirror

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// Digest is what two clusters holding the same state at a revision agree on:
// the number of keys and a CRC-32C over (key, value, create, mod, version,
// lease) in key order (mvcc.HashKeyValue, the store's HashKV).
type Digest struct {
	Revision, Keys int64
	Hash           uint32
}

func (d Digest) String() string {
	return fmt.Sprintf("%d keys, hash %08x at revision %d", d.Keys, d.Hash, d.Revision)
}

// digestPage is how many keys one read of a digest returns.
const digestPage = 1000

// etcdDigest reads an etcd-API cluster at rev in pages and digests it.
func etcdDigest(ctx context.Context, cli *clientv3.Client, name string, rev int64) (Digest, error) {
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	d := Digest{Revision: rev}
	key := "\x00"
	var buf []byte
	for {
		resp, err := cli.Get(ctx, key, clientv3.WithRange("\x00"), clientv3.WithLimit(digestPage), clientv3.WithRev(rev))
		if errors.Is(err, rpctypes.ErrCompacted) {
			return d, &SourceCompactedError{Source: name, Need: rev, Compacted: -1}
		}
		if err != nil {
			return d, fmt.Errorf("read %s at revision %d: %w", name, rev, err)
		}
		for _, kv := range resp.Kvs {
			buf = mvcc.HashKeyValue(buf[:0], kv)
			h.Write(buf)
			d.Keys++
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	d.Hash = h.Sum32()
	return d, nil
}

// storeDigest digests the local store at rev.
func storeDigest(ctx context.Context, st *mvcc.Store, rev int64) (Digest, error) {
	d, err := st.HashKV(ctx, rev)
	if errors.Is(err, mvcc.ErrCompacted) {
		return Digest{}, &SourceCompactedError{Source: "the store", Need: rev, Compacted: st.CompactedRev()}
	}
	if err != nil {
		return Digest{}, fmt.Errorf("hash the store at revision %d: %w", rev, err)
	}
	return Digest{Revision: d.Revision, Keys: d.Keys, Hash: d.Hash}, nil
}
