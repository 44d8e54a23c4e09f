package etcdapi

import (
	"context"
	"errors"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// Watch serves one Watch stream: a receiver goroutine turns requests into
// watches on an mvcc.WatchStream, and this goroutine sends what the stream
// produces, in order, plus the periodic progress notifications.
func (s *Server) Watch(stream grpc.BidiStreamingServer[pb.WatchRequest, pb.WatchResponse]) error {
	if err := s.requireLeader(stream.Context()); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	ws := s.store.NewWatchStream()
	defer ws.Close()

	recvErr := make(chan error, 1)
	go func() {
		defer cancel()
		recvErr <- s.recvWatch(stream, ws)
	}()

	progress := time.NewTicker(progressCheck(s.cfg.ProgressNotifyInterval))
	defer progress.Stop()
	leaderLost := s.monitorLeader(ctx)
	// Everything the stream sends — events, progress, created and canceled
	// answers — comes out of ws in order; this goroutine sends it as soon
	// as it is queued (Ready, then Take: no goroutine between the commit's
	// notify and the send).
	for {
		select {
		case <-progress.C:
			ws.NotifyProgress(s.cfg.ProgressNotifyInterval)
		case <-ws.Ready():
			resps, err := ws.Take()
			if errors.Is(err, mvcc.ErrClosed) {
				return errStopped
			}
			if err != nil {
				return toGRPC(err)
			}
			for _, r := range resps {
				r.Header = s.fill(r.Header)
				if err := s.sendWatch(stream, r, len(r.Events) > 1 && ws.WantsFragments(r.WatchId)); err != nil {
					return err
				}
			}
		case err := <-recvErr:
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		case <-ws.Stopped():
			return errStopped
		case <-leaderLost:
			return rpctypes.ErrGRPCNoLeader
		case <-ctx.Done():
			return nil
		}
	}
}

// monitorLeader is closed when a client that requires a leader
// (clientv3.WithRequireLeader, as kube-apiserver's watches) watches a member
// that has had no leader for two checks in a row, 500 ms apart: the stream
// then ends with ErrGRPCNoLeader so the client moves to another member, as
// etcd's monitorLeader does.
func (s *Server) monitorLeader(ctx context.Context) <-chan struct{} {
	lost := make(chan struct{})
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok || len(md.Get(rpctypes.MetadataRequireLeaderKey)) == 0 {
		return lost
	}
	go func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		misses := 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if s.cluster.RaftStatus().Leader != 0 {
				misses = 0
				continue
			}
			if misses++; misses >= 2 {
				close(lost)
				return
			}
		}
	}()
	return lost
}

// recvWatch handles a stream's requests until it ends and returns why.
func (s *Server) recvWatch(stream grpc.BidiStreamingServer[pb.WatchRequest, pb.WatchResponse], ws *mvcc.WatchStream) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		switch {
		case req.GetCreateRequest() != nil:
			cr := req.GetCreateRequest()
			id, err := ws.Watch(watchOptions(cr))
			if err != nil {
				// etcd answers a bad create with a created+canceled response.
				resp := &pb.WatchResponse{Header: s.header(s.store.Rev()), WatchId: cr.WatchId, Created: true, Canceled: true, CancelReason: err.Error()}
				ws.Reply(resp)
				continue
			}
			_ = id
		case req.GetCancelRequest() != nil:
			ws.Cancel(req.GetCancelRequest().WatchId)
		case req.GetProgressRequest() != nil:
			ws.RequestProgress()
		}
	}
}

var errStopped = toGRPC(mvcc.ErrClosed)

func progressCheck(interval time.Duration) time.Duration {
	return max(min(interval/4, time.Second), 10*time.Millisecond)
}

func watchOptions(cr *pb.WatchCreateRequest) mvcc.WatchOptions {
	o := mvcc.WatchOptions{
		ID: cr.WatchId, Key: cr.Key, End: cr.RangeEnd, StartRev: cr.StartRevision,
		PrevKV: cr.PrevKv, ProgressNotify: cr.ProgressNotify, Fragment: cr.Fragment,
	}
	for _, f := range cr.Filters {
		switch f {
		case pb.WatchCreateRequest_NOPUT:
			o.NoPut = true
		case pb.WatchCreateRequest_NODELETE:
			o.NoDelete = true
		}
	}
	return o
}

// sendWatch sends r, split into fragments when the watcher asked for them
// and r exceeds the request size limit.
func (s *Server) sendWatch(stream grpc.BidiStreamingServer[pb.WatchRequest, pb.WatchResponse], r *pb.WatchResponse, frag bool) error {
	if !frag || len(r.Events) < 2 || proto.Size(r) <= s.cfg.MaxRequestBytes {
		return stream.Send(r)
	}
	var (
		part []*mvccpb.Event
		size int
	)
	for i, ev := range r.Events {
		sz := proto.Size(ev)
		if len(part) > 0 && size+sz > s.cfg.MaxRequestBytes {
			out := proto.Clone(r).(*pb.WatchResponse)
			out.Events, out.Fragment = part, true
			if err := stream.Send(out); err != nil {
				return err
			}
			part, size = nil, 0
		}
		part = append(part, ev)
		size += sz
		if i == len(r.Events)-1 {
			out := proto.Clone(r).(*pb.WatchResponse)
			out.Events, out.Fragment = part, false
			return stream.Send(out)
		}
	}
	return nil
}
