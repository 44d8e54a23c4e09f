package etcdapi

import (
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// The process's "proto" codec is gRPC's, plus the Range replies whose
// key-values are encoded already (range_reply.go): every other message,
// sent or received, by a server or a client, is marshaled by gRPC's own
// codec exactly as before. It is registered under gRPC's name rather than
// forced on the API's servers (grpc.ForceServerCodecV2) because a forced
// codec would also take the requests of services called with another
// content subtype (the mirror API's "json").
//
// Registration happens in init, as gRPC requires; gRPC's proto package is
// imported here, so its own registration runs first and this one replaces
// it.
func init() {
	encoding.RegisterCodecV2(codec{proto: encoding.GetCodecV2(grpcproto.Name)})
}

// codec marshals a *rangeReply from its buffers and hands everything else
// to gRPC's proto codec.
type codec struct {
	proto encoding.CodecV2
}

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*rangeReply); ok {
		return r.marshal()
	}
	return c.proto.Marshal(v)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	return c.proto.Unmarshal(data, v)
}

func (codec) Name() string { return grpcproto.Name }
