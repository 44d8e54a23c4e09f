package etcdapi

import (
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// A Range over the wire is answered with a rangeReply: its key-values are
// written in protobuf wire format as the store reads them (mvcc.KVSink),
// into buffers from gRPC's pool, and the process's proto codec (codec.go)
// hands those buffers to gRPC as the marshaled message; gRPC returns them to the
// pool once they are written to the connection. A value is copied once,
// from pebble's block into the buffer, instead of into a KeyValue and then
// again by the marshal, and a page of 10,000 keys leaves no garbage for the
// collector (issue #15: KeyValues 7 %, marshal 13 % and GC marking 19 % of
// the store's CPU in a paged list of 100,000 keys).
//
// Invariant: the bytes equal proto.Marshal of the RangeResponse Range
// returns (fields in number order: header, kvs, more, count; each KeyValue
// as the generated code writes it) — TestRangeReplyMarshalsAsProto.

// Field numbers of etcdserverpb.RangeResponse and mvccpb.KeyValue.
const (
	fieldRangeHeader = 1
	fieldRangeKvs    = 2
	fieldRangeMore   = 3
	fieldRangeCount  = 4

	fieldKVKey     = 1
	fieldKVCreate  = 2
	fieldKVMod     = 3
	fieldKVVersion = 4
	fieldKVValue   = 5
	fieldKVLease   = 6
)

// replyChunkSizes are the sizes of a reply's buffers: the first ones small
// (a single key's read), then the pool's largest tier.
var replyChunkSizes = [...]int{4 << 10, 32 << 10, 1 << 20}

// rangeReply is a RangeResponse whose key-values are already encoded.
type rangeReply struct {
	head *pb.RangeResponse // header, more and count; no Kvs
	kvs  kvEncoder
	sent bool // marshaled: the buffers belong to gRPC
}

// kvEncoder is an mvcc.KVSink writing each KeyValue as a kvs field of a
// RangeResponse into pooled buffers.
type kvEncoder struct {
	pool   mem.BufferPool
	full   mem.BufferSlice
	cur    *[]byte // the buffer being filled, or nil
	off    int     // bytes of cur written
	chunks int     // buffers taken so far
	n      int     // key-values added
	size   int     // bytes written
	last   []byte  // the last key added
	tmp    [64]byte
}

// AddKV writes one KeyValue; key and value are copied.
func (e *kvEncoder) AddKV(key, value []byte, create, mod, version, lease int64) {
	e.n++
	e.last = append(e.last[:0], key...)
	size := 0
	if len(key) > 0 {
		size += 1 + protowire.SizeBytes(len(key))
	}
	for _, v := range [...]int64{create, mod, version} {
		if v != 0 {
			size += 1 + protowire.SizeVarint(uint64(v))
		}
	}
	if len(value) > 0 {
		size += 1 + protowire.SizeBytes(len(value))
	}
	if lease != 0 {
		size += 1 + protowire.SizeVarint(uint64(lease))
	}
	b := protowire.AppendTag(e.tmp[:0], fieldRangeKvs, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	b = e.bytesField(b, fieldKVKey, key)
	for i, v := range [...]int64{create, mod, version} {
		b = varintField(b, protowire.Number(fieldKVCreate+i), v)
	}
	b = e.bytesField(b, fieldKVValue, value)
	b = varintField(b, fieldKVLease, lease)
	e.write(b)
}

// bytesField writes the pending header bytes b and the field num holding
// p (none if p is empty, as proto3 leaves it out), and returns the header
// buffer emptied; with p empty it returns b as it is.
func (e *kvEncoder) bytesField(b []byte, num protowire.Number, p []byte) []byte {
	if len(p) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(len(p)))
	e.write(b)
	e.write(p)
	return e.tmp[:0]
}

// varintField appends the field num holding v to b (nothing if v is 0).
func varintField(b []byte, num protowire.Number, v int64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}

// Reset drops what was written (the store starts its read over).
func (e *kvEncoder) Reset() {
	e.free()
}

// write appends p, taking a new buffer whenever the current one is full.
func (e *kvEncoder) write(p []byte) {
	for len(p) > 0 {
		if e.cur == nil || e.off == len(*e.cur) {
			e.next()
		}
		n := copy((*e.cur)[e.off:], p)
		e.off += n
		e.size += n
		p = p[n:]
	}
}

// next closes the current buffer and takes the next from the pool.
func (e *kvEncoder) next() {
	if e.cur != nil {
		e.full = append(e.full, mem.NewBuffer(e.cur, e.pool))
	}
	e.cur = e.pool.Get(replyChunkSizes[min(e.chunks, len(replyChunkSizes)-1)])
	e.off = 0
	e.chunks++
}

// buffers returns what was written; the encoder keeps nothing of it.
func (e *kvEncoder) buffers() mem.BufferSlice {
	if e.cur != nil {
		*e.cur = (*e.cur)[:e.off]
		e.full = append(e.full, mem.NewBuffer(e.cur, e.pool))
		e.cur = nil
	}
	out := e.full
	*e = kvEncoder{pool: e.pool}
	return out
}

// free returns every buffer to the pool and empties the encoder.
func (e *kvEncoder) free() {
	e.full.Free()
	if e.cur != nil {
		e.pool.Put(e.cur)
	}
	*e = kvEncoder{pool: e.pool}
}

// marshal returns the reply's wire format: the header, the encoded
// key-values, more and count. It can be called once: the buffers go to the
// caller (gRPC frees them once written).
func (r *rangeReply) marshal() (mem.BufferSlice, error) {
	if r.sent {
		return nil, errors.New("etcdapi: a range reply was marshaled twice")
	}
	r.sent = true
	var head []byte
	if r.head.Header != nil {
		h, err := proto.Marshal(r.head.Header)
		if err != nil {
			r.kvs.free()
			return nil, fmt.Errorf("marshal range response header: %w", err)
		}
		head = protowire.AppendTag(head, fieldRangeHeader, protowire.BytesType)
		head = protowire.AppendBytes(head, h)
	}
	var tail []byte
	if r.head.More {
		tail = protowire.AppendTag(tail, fieldRangeMore, protowire.VarintType)
		tail = protowire.AppendVarint(tail, 1)
	}
	if r.head.Count != 0 {
		tail = protowire.AppendTag(tail, fieldRangeCount, protowire.VarintType)
		tail = protowire.AppendVarint(tail, uint64(r.head.Count))
	}
	kvs := r.kvs.buffers()
	out := make(mem.BufferSlice, 0, len(kvs)+2)
	if len(head) > 0 {
		out = append(out, mem.SliceBuffer(head))
	}
	out = append(out, kvs...)
	if len(tail) > 0 {
		out = append(out, mem.SliceBuffer(tail))
	}
	return out, nil
}

// rangeReply serves KV.Range over gRPC: Range, with the key-values encoded
// as they are read.
func (s *Server) rangeReply(ctx context.Context, r *pb.RangeRequest) (*rangeReply, error) {
	if err := checkRange(r); err != nil {
		return nil, err
	}
	if err := s.readBarrier(ctx, r.Serializable); err != nil {
		return nil, err
	}
	if s.cfg.RangeReadAhead {
		if reply := s.fromAhead(r); reply != nil {
			s.readAhead(r, reply)
			return reply, nil
		}
	}
	reply := &rangeReply{kvs: kvEncoder{pool: mem.DefaultBufferPool()}}
	resp, err := s.store.RangeTo(ctx, r, &reply.kvs)
	if err != nil {
		reply.kvs.free()
		return nil, toGRPC(err)
	}
	resp.Header = s.fill(resp.Header)
	reply.head = resp
	if s.cfg.RangeReadAhead {
		s.readAhead(r, reply)
	}
	return reply, nil
}

// rangeHandler is KV.Range's gRPC method handler (in place of the
// generated one, which would call Range): it answers with a rangeReply.
func (s *Server) rangeHandler(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(pb.RangeRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	handler := func(ctx context.Context, req any) (any, error) {
		return s.rangeReply(ctx, req.(*pb.RangeRequest))
	}
	if interceptor == nil {
		return handler(ctx, in)
	}
	return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: s, FullMethod: pb.KV_Range_FullMethodName}, handler)
}
