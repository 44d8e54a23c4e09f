package etcdapi

import (
	"crypto/sha256"
	"errors"
	"io"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/quantyroot/quantykube/internal/store/snapshot"
)

// snapshotChunk is the size of each message of the stream, etcd's
// snapshotSendBufferSize.
const snapshotChunk = 32 * 1024

// Snapshot serves Maintenance.Snapshot: the store in etcd's own snapshot
// format (package snapshot), so `etcdctl snapshot save` works against it and
// etcdutl reads and restores the file. The snapshot is one consistent view
// of the store, written to a temporary file beside the data dir while
// writers go on (they are never paused for it), then streamed in chunks
// followed by the SHA-256 of the bytes sent, as etcd's server does. The file
// is removed when the stream ends, whether it completed, failed or the
// client went away.
func (s *Server) Snapshot(r *pb.SnapshotRequest, stream grpc.ServerStreamingServer[pb.SnapshotResponse]) error {
	s.snapshots.Add(1)
	defer s.snapshots.Done()
	ctx := stream.Context()
	f, err := snapshot.Take(ctx, s.store, s.memberID, s.cfg.Logger)
	if err != nil {
		s.cfg.Logger.Warn("snapshot failed", "err", err)
		return toGRPC(err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return toGRPC(err)
	}
	s.cfg.Logger.Info("sending snapshot", "revision", f.Rev, "compacted", f.Compacted, "bytes", size,
		"base_keys", f.Base, "changes", f.Changes, "leases", f.Leases, "build", f.Build.Round(time.Millisecond).String())
	start := time.Now()
	if err := s.sendSnapshot(f, size, stream); err != nil {
		s.cfg.Logger.Warn("snapshot not sent", "revision", f.Rev, "err", err)
		return toGRPC(err)
	}
	s.cfg.Logger.Info("snapshot sent", "revision", f.Rev, "bytes", size, "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// sendSnapshot streams f's size bytes in chunks, then their SHA-256.
func (s *Server) sendSnapshot(f *snapshot.File, size int64, stream grpc.ServerStreamingServer[pb.SnapshotResponse]) error {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := f.WriteTo(pw)
		pw.CloseWithError(err)
	}()
	defer func() {
		pr.Close() // ends WriteTo if the stream stopped early
		<-done
	}()
	h := sha256.New()
	var sent int64
	for sent < size {
		// A new buffer per message: Send may keep it until it is on the wire.
		buf := make([]byte, min(snapshotChunk, size-sent))
		n, err := io.ReadFull(pr, buf)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		sent += int64(n)
		h.Write(buf[:n])
		resp := &pb.SnapshotResponse{RemainingBytes: uint64(size - sent), Blob: buf[:n], Version: snapshot.StorageVersion.String()}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
	return stream.Send(&pb.SnapshotResponse{Blob: h.Sum(nil), Version: snapshot.StorageVersion.String()})
}
