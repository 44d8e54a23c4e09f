package mirror

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Change is everything one source revision changed: its events in
// sub-revision order, each with the key-value before it.
type Change struct {
	Rev    int64
	Events []*mvccpb.Event
}

// appendEvents groups events (in revision order, as a watch delivers them)
// into changes, continuing the last change of out when it has the same
// revision.
func appendEvents(out []Change, evs []*mvccpb.Event) []Change {
	for _, ev := range evs {
		rev := ev.Kv.ModRevision
		if n := len(out); n > 0 && out[n-1].Rev == rev {
			out[n-1].Events = append(out[n-1].Events, ev)
			continue
		}
		out = append(out, Change{Rev: rev, Events: []*mvccpb.Event{ev}})
	}
	return out
}

// Txn is the transaction that makes this revision on a target holding the
// source's state before it: one compare per key (its mod revision before, or
// that it did not exist), then the puts and deletes in order. On a target in
// another state the compares fail and nothing changes; a transaction applied
// twice fails the second time.
func (c Change) Txn() *pb.TxnRequest {
	t := &pb.TxnRequest{}
	for _, ev := range c.Events {
		key := ev.Kv.Key
		switch {
		case ev.Type == mvccpb.PUT && ev.Kv.Version == 1: // created here
			t.Compare = append(t.Compare, &pb.Compare{Key: key, Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL,
				TargetUnion: &pb.Compare_CreateRevision{CreateRevision: 0}})
		case ev.PrevKv != nil:
			t.Compare = append(t.Compare, &pb.Compare{Key: key, Target: pb.Compare_MOD, Result: pb.Compare_EQUAL,
				TargetUnion: &pb.Compare_ModRevision{ModRevision: ev.PrevKv.ModRevision}})
		}
		if ev.Type == mvccpb.PUT {
			t.Success = append(t.Success, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{
				Key: key, Value: ev.Kv.Value, Lease: ev.Kv.Lease}}})
		} else {
			t.Success = append(t.Success, &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: key}}})
		}
	}
	return t
}

// size estimates the bytes the change takes in a request.
func (c Change) size() int {
	n := 16
	for _, ev := range c.Events {
		n += 2*len(ev.Kv.Key) + len(ev.Kv.Value) + 32
	}
	return n
}

// leases returns the leases the change's puts attach.
func (c Change) leases() []int64 {
	var out []int64
	for _, ev := range c.Events {
		if ev.Type == mvccpb.PUT && ev.Kv.Lease != 0 {
			out = append(out, ev.Kv.Lease)
		}
	}
	return out
}
