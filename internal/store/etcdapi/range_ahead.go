package etcdapi

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/mem"
)

// A paginated list (kube-apiserver filling its watch cache, clientv3's and
// etcdctl's paginators) asks for a page, decodes it, then asks for the next
// one: the key after the page's last, the same range end and limit, at the
// first page's revision. Server and client take turns, each idle while the
// other works. After answering a page that has more, the server reads the
// next one in the background (readAhead) and answers that exact request
// with it if it comes (take), so the read overlaps the client's decoding.
//
// Invariants:
//   - A page read ahead is the answer a read at that moment would give: the
//     request names its revision, and the key-values, count and more of a
//     past revision never change — except that a compaction past it makes
//     the read fail, so a page is not served once its revision is
//     compacted. The header is the server's at the time it is served, as
//     for any read.
//   - A page is served once and held at most aheadTTL; at most aheadPages
//     pages and aheadBytes bytes (estimated by the page before) are held or
//     being read at once. Its buffers go back to gRPC's pool when it
//     expires, is served (after gRPC wrote it) or the server stops.
//   - The request is checked (checkRange, the read barrier) as any other
//     before a page read ahead answers it.
//
// A page is read ahead only while writes are quiet (no write arrived in the
// last aheadQuiet): the read is the same work the request would do, but
// done sooner it competes with writers for the CPU, so a store that is
// being written serves its pages on request, as without read-ahead.
//
// The cost is one page read that no one asks for at the end of a list a
// client abandons, and the pages held (at most aheadBytes) (ADR 012).
const (
	aheadPages = 4
	aheadBytes = 32 << 20
)

// aheadTTL is how long a page read ahead is held (a variable for tests).
var aheadTTL = 5 * time.Second

// aheadQuiet is how long no write must have arrived for a page to be read
// ahead (a variable for tests; 0: always).
var aheadQuiet = 10 * time.Millisecond

// pageKey names a page request exactly, as a paginating client sends it.
type pageKey struct {
	key, end   string
	rev, limit int64
	keysOnly   bool
}

// aheadPage is a page being read or read.
type aheadPage struct {
	done  chan struct{} // closed once reply (or the failure) is set
	reply *rangeReply   // nil if the read failed
	size  int           // bytes reserved or held
}

// readAheads holds the pages read ahead.
type readAheads struct {
	mu      sync.Mutex
	pages   map[pageKey]*aheadPage
	bytes   int
	stopped bool
	wg      sync.WaitGroup
	served  atomic.Int64 // requests answered with a page read ahead
	unused  atomic.Int64 // pages read ahead and dropped unasked (expired, compacted, stopped)
}

// ReadAheadPages returns how many pages read ahead answered a request and
// how many were dropped without answering one, since the server started.
func (s *Server) ReadAheadPages() (served, unused int64) {
	return s.ahead.served.Load(), s.ahead.unused.Load()
}

// nextPageKey returns the page a paginating client asks for after r
// answered by reply, and whether r is a page of such a list: a limited
// range of keys in key order, without revision filters, that has more.
func nextPageKey(r *pb.RangeRequest, reply *rangeReply) (pageKey, bool) {
	if !isPage(r) || !reply.head.More || reply.kvs.n == 0 || reply.head.Header == nil {
		return pageKey{}, false
	}
	rev := r.Revision
	if rev == 0 {
		rev = reply.head.Header.Revision
	}
	next := append(bytes.Clone(reply.kvs.last), 0)
	return pageKey{key: string(next), end: string(r.RangeEnd), rev: rev, limit: r.Limit, keysOnly: r.KeysOnly}, true
}

// isPage reports whether r may be a page of a paginated list: a limited
// range of keys, in key order, without revision filters, not count only.
// Only such requests are read ahead and answered from pages read ahead.
func isPage(r *pb.RangeRequest) bool {
	inOrder := (r.SortOrder == pb.RangeRequest_NONE || r.SortOrder == pb.RangeRequest_ASCEND) && r.SortTarget == pb.RangeRequest_KEY
	return r.Limit > 0 && len(r.RangeEnd) > 0 && !r.CountOnly && inOrder &&
		r.MinModRevision == 0 && r.MaxModRevision == 0 && r.MinCreateRevision == 0 && r.MaxCreateRevision == 0
}

// pageKeyOf names the page r asks for.
func pageKeyOf(r *pb.RangeRequest) pageKey {
	return pageKey{key: string(r.Key), end: string(r.RangeEnd), rev: r.Revision, limit: r.Limit, keysOnly: r.KeysOnly}
}

// readAhead starts reading the page after r (answered by reply) if r is a
// page of a paginated list and the limits allow.
func (s *Server) readAhead(r *pb.RangeRequest, reply *rangeReply) {
	k, ok := nextPageKey(r, reply)
	if !ok || !s.store.WritesQuietFor(aheadQuiet) {
		return
	}
	a := &s.ahead
	size := max(reply.kvs.size, 1)
	a.mu.Lock()
	if a.stopped || a.pages[k] != nil || len(a.pages) >= aheadPages || a.bytes+size > aheadBytes {
		a.mu.Unlock()
		return
	}
	if a.pages == nil {
		a.pages = map[pageKey]*aheadPage{}
	}
	p := &aheadPage{done: make(chan struct{}), size: size}
	a.pages[k] = p
	a.bytes += size
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		req := &pb.RangeRequest{Key: []byte(k.key), RangeEnd: []byte(k.end), Limit: k.limit, Revision: k.rev, KeysOnly: k.keysOnly}
		next := &rangeReply{kvs: kvEncoder{pool: mem.DefaultBufferPool()}}
		resp, err := s.store.RangeTo(context.Background(), req, &next.kvs)
		if err != nil {
			next.kvs.free()
			next = nil
		} else {
			next.head = resp
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		p.reply = next
		close(p.done)
		if a.pages[k] != p { // taken while it was read, or stopped
			return
		}
		if next != nil {
			a.bytes += next.kvs.size - p.size
			p.size = next.kvs.size
		}
		time.AfterFunc(aheadTTL, func() { a.drop(k, p) })
	}()
}

// drop forgets p (under k) unless it was taken, and frees it.
func (a *readAheads) drop(k pageKey, p *aheadPage) {
	a.mu.Lock()
	if a.pages[k] != p {
		a.mu.Unlock()
		return
	}
	delete(a.pages, k)
	a.bytes -= p.size
	a.mu.Unlock()
	a.unused.Add(1)
	if p.reply != nil {
		p.reply.kvs.free()
	}
}

// take returns the page read ahead for k, waiting for its read to end, or
// nil if there is none (or its read failed).
func (a *readAheads) take(k pageKey) *rangeReply {
	a.mu.Lock()
	p := a.pages[k]
	if p != nil {
		delete(a.pages, k)
		a.bytes -= p.size
	}
	a.mu.Unlock()
	if p == nil {
		return nil
	}
	<-p.done
	if p.reply == nil {
		a.unused.Add(1) // its read failed: the request reads for itself
	}
	return p.reply
}

// stop waits for the reads ahead in flight and frees every page held; no
// page is read ahead after it.
func (a *readAheads) stop() {
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
	a.wg.Wait()
	a.mu.Lock()
	pages := a.pages
	a.pages, a.bytes = nil, 0
	a.mu.Unlock()
	for _, p := range pages {
		a.unused.Add(1)
		if p.reply != nil {
			p.reply.kvs.free()
		}
	}
}

// fromAhead answers r with the page read ahead for it, if there is one
// that may answer it (its revision not compacted since); nil otherwise.
func (s *Server) fromAhead(r *pb.RangeRequest) *rangeReply {
	if r.Revision == 0 || !isPage(r) || s.ahead.idle() {
		return nil
	}
	reply := s.ahead.take(pageKeyOf(r))
	if reply == nil {
		return nil
	}
	if r.Revision < s.store.CompactedRev() {
		reply.kvs.free() // the read itself reports the compaction
		s.ahead.unused.Add(1)
		return nil
	}
	reply.head.Header = s.fill(nil)
	s.ahead.served.Add(1)
	return reply
}

// idle reports whether no page is held or being read (a cheap check
// before building the request's key).
func (a *readAheads) idle() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.pages) == 0
}
