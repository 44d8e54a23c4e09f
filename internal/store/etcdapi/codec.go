package etcdapi

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// ServerOptions are the options a gRPC server the API is registered on
// (Register) must be built with: its codec marshals the Range replies
// (range_reply.go). Without them a Range fails with gRPC's "error while
// marshaling".
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(serverCodec{proto: encoding.GetCodecV2(grpcproto.Name)})}
}

// serverCodec is gRPC's proto codec, plus the Range replies whose
// key-values are encoded already.
type serverCodec struct {
	proto encoding.CodecV2
}

func (c serverCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*rangeReply); ok {
		return r.marshal()
	}
	return c.proto.Marshal(v)
}

func (c serverCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return c.proto.Unmarshal(data, v)
}

func (serverCodec) Name() string { return grpcproto.Name }
