package storemove

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultPageSize is how many keys the first read of a walk over etcd's
// keyspace returns (the keyspace is never held in memory whole); the later
// pages are sized by bytes (pageSizer).
const DefaultPageSize = 1000

// Pages after the first aim at pageBytes of keys and values, between
// minPageKeys and maxPageKeys keys. etcd walks its index over the whole
// rest of the range on every read with a limit (to count it), so the
// number of pages, not their size, makes a large key space slow to read:
// 1,000,000 keys of 1 KiB in pages of 1,000 took 88 s to copy, against
// 19 s for etcd to serve them all in pages of 10,000 (bench, 6 December).
// The bulk copy holds three pages at most (readPages), ~24 MiB; objects
// of 100 KiB and more bring pages down to minPageKeys.
const (
	pageBytes   = 8 << 20
	minPageKeys = 100
	maxPageKeys = 50000
)

// pageKeys returns the size of the next page after keys keys of bytes
// bytes (keys and values) were read.
func pageKeys(keys, bytes int64) int {
	if keys <= 0 || bytes <= 0 {
		return DefaultPageSize
	}
	per := max(bytes/keys, 1)
	return int(min(max(pageBytes/per, minPageKeys), maxPageKeys))
}

// pageSizer sizes the pages of one walk over a keyspace: every page of
// fixed keys when fixed > 0, else the first of DefaultPageSize keys and the
// later ones by the bytes a key took so far (pageKeys), each at most twice
// the one before. The growth keeps a small keyspace in several pages, so
// the bulk copy's read of the next page still overlaps the import of the
// last (readPages): 8,000 keys of 1 KiB are 4 pages instead of 2, while a
// large keyspace reaches ~8 MiB pages by its fourth. The bulk copy, the
// verify step's digest of etcd and the undo's comparison all walk whole
// keyspaces with it.
type pageSizer struct {
	fixed       int
	keys, bytes int64
	last        int // keys of the last page read
}

// size is the number of keys to ask for next.
func (p *pageSizer) size() int {
	if p.fixed > 0 {
		return p.fixed
	}
	n := pageKeys(p.keys, p.bytes)
	if p.last > 0 {
		n = min(n, 2*p.last)
	}
	return n
}

// read records a page that was read.
func (p *pageSizer) read(kvs []*mvccpb.KeyValue) {
	for _, kv := range kvs {
		p.bytes += int64(len(kv.Key) + len(kv.Value))
	}
	p.keys += int64(len(kvs))
	p.last = len(kvs)
}

// pager walks a whole keyspace at one revision, a page at a time (the bulk
// copy, the verify step's digest of etcd and the undo's merge).
type pager struct {
	cli   *clientv3.Client
	rev   int64 // 0 until the first page is read: then its revision
	from  []byte
	done  bool // the last page was read
	sizer pageSizer
}

func newPager(cli *clientv3.Client, rev int64) *pager {
	return &pager{cli: cli, rev: rev, from: []byte{0}}
}

// page reads the next page; it returns nothing once done.
func (p *pager) page(ctx context.Context) ([]*mvccpb.KeyValue, error) {
	if p.done {
		return nil, nil
	}
	opts := []clientv3.OpOption{clientv3.WithRange("\x00"), clientv3.WithLimit(int64(p.sizer.size()))}
	if p.rev != 0 {
		opts = append(opts, clientv3.WithRev(p.rev))
	}
	resp, err := p.cli.Get(ctx, string(p.from), opts...)
	if err != nil {
		return nil, fmt.Errorf("read keys from %q at revision %d: %w", p.from, p.rev, err)
	}
	if p.rev == 0 {
		p.rev = resp.Header.Revision
	}
	p.sizer.read(resp.Kvs)
	p.done = !resp.More || len(resp.Kvs) == 0
	if len(resp.Kvs) > 0 {
		p.from = append(append([]byte(nil), resp.Kvs[len(resp.Kvs)-1].Key...), 0)
	}
	return resp.Kvs, nil
}
