package mvcc

import (
	"encoding/binary"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"
)

// extensionMagic starts the data of a raft entry holding an Extension. A
// protobuf message never starts with a zero byte (field number 0 is
// invalid), so no InternalRaftRequest is ever mistaken for one, and a binary
// that does not know extensions refuses the entry instead of misreading it.
const extensionMagic = "\x00qkx\x01"

const (
	extMode   = 'm'
	extNotice = 'n'
	extReplay = 'r'
)

// EncodeExtension encodes x with the proposal id the proposer waits on.
func EncodeExtension(id uint64, x *Extension) ([]byte, error) {
	b := append([]byte(extensionMagic), make([]byte, 8)...)
	binary.BigEndian.PutUint64(b[len(extensionMagic):], id)
	switch {
	case x.Mode != nil:
		c := x.Mode
		b = append(b, extMode)
		b = binary.BigEndian.AppendUint64(b, c.Epoch)
		b = binary.AppendVarint(b, c.AtRev)
		b = append(b, flagByte(c.HoldLeases)|flagByte(c.RenewLeases)<<1|flagByte(c.AcceptReplay)<<2)
		return append(b, c.Record...), nil
	case x.Notice != nil:
		return append(append(b, extNotice), x.Notice...), nil
	case x.Replay != nil:
		return encodeReplay(append(b, extReplay), x.Replay)
	}
	return nil, errors.New("mvcc: empty extension")
}

func flagByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func encodeReplay(b []byte, r *ReplayBatch) ([]byte, error) {
	b = binary.AppendUvarint(b, uint64(len(r.Grants)))
	for _, g := range r.Grants {
		b = binary.AppendVarint(binary.AppendVarint(b, g.ID), g.TTL)
	}
	b = binary.AppendUvarint(b, uint64(len(r.Txns)))
	for _, t := range r.Txns {
		data, err := proto.Marshal(t.Txn)
		if err != nil {
			return nil, fmt.Errorf("encode replayed revision %d: %w", t.Rev, err)
		}
		b = binary.AppendVarint(b, t.Rev)
		b = binary.AppendUvarint(b, uint64(len(data)))
		b = append(b, data...)
	}
	b = binary.AppendUvarint(b, uint64(len(r.Revokes)))
	for _, id := range r.Revokes {
		b = binary.AppendVarint(b, id)
	}
	return b, nil
}

// DecodeExtension decodes an entry made by EncodeExtension. ok is false for
// any other entry (an etcd request), which the caller decodes as such.
func DecodeExtension(data []byte) (id uint64, x *Extension, ok bool, err error) {
	if len(data) < len(extensionMagic) || string(data[:len(extensionMagic)]) != extensionMagic {
		return 0, nil, false, nil
	}
	d := decoder{b: data[len(extensionMagic):]}
	id = d.u64()
	kind := d.byte()
	x = &Extension{}
	switch kind {
	case extMode:
		c := &ModeChange{Epoch: d.u64(), AtRev: d.varint()}
		f := d.byte()
		c.HoldLeases, c.RenewLeases, c.AcceptReplay = f&1 != 0, f&2 != 0, f&4 != 0
		c.Record = d.rest()
		x.Mode = c
	case extNotice:
		x.Notice = d.rest()
		if x.Notice == nil {
			x.Notice = []byte{}
		}
	case extReplay:
		x.Replay = d.replay()
	default:
		d.err = fmt.Errorf("unknown extension kind %q", kind)
	}
	if d.err != nil {
		return 0, nil, true, fmt.Errorf("decode store extension: %w", d.err)
	}
	return id, x, true, nil
}

// decoder reads what EncodeExtension wrote; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errors.New("truncated")
	}
	d.b = nil
}

func (d *decoder) u64() uint64 {
	if len(d.b) < 8 {
		d.fail()
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > uint64(len(d.b)-n) { // a count or a length never exceeds what is left
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(n uint64) []byte {
	if uint64(len(d.b)) < n {
		d.fail()
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) rest() []byte {
	if len(d.b) == 0 {
		return nil
	}
	v := append([]byte(nil), d.b...)
	d.b = nil
	return v
}

func (d *decoder) replay() *ReplayBatch {
	r := &ReplayBatch{}
	for n := d.uvarint(); n > 0 && d.err == nil; n-- {
		r.Grants = append(r.Grants, LeaseGrant{ID: d.varint(), TTL: d.varint()})
	}
	for n := d.uvarint(); n > 0 && d.err == nil; n-- {
		t := ReplayTxn{Rev: d.varint(), Txn: &pb.TxnRequest{}}
		data := d.bytes(d.uvarint())
		if d.err == nil {
			if err := proto.Unmarshal(data, t.Txn); err != nil {
				d.err = err
			}
		}
		r.Txns = append(r.Txns, t)
	}
	for n := d.uvarint(); n > 0 && d.err == nil; n-- {
		r.Revokes = append(r.Revokes, d.varint())
	}
	return r
}
