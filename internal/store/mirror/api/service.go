package api

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
)

// ServiceName is the admin service's gRPC name.
const ServiceName = "quantykube.store.mirror.v1.Mirror"

// Codec is the name of the JSON codec the service is called with
// (content-subtype "application/grpc+json"): the messages are the Go types
// of this package, so no protobuf definitions are needed.
const Codec = "json"

func init() { encoding.RegisterCodec(jsonCodec{}) }

type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
func (jsonCodec) Name() string                       { return Codec }

// Server is what a member serves.
type Server interface {
	Start(ctx context.Context, r *StartRequest) (*Status, error)
	Status(ctx context.Context, r *StatusRequest) (*Status, error)
	Cutover(ctx context.Context, r *TransitionRequest) (*TransitionResult, error)
	ReplayTo(ctx context.Context, r *ReplayToRequest) (*Status, error)
	Cutback(ctx context.Context, r *TransitionRequest) (*TransitionResult, error)
}

// Register serves srv on g.
func Register(g *grpc.Server, srv Server) {
	g.RegisterService(&serviceDesc, srv)
}

func handler[Req any, Resp any](call func(Server, context.Context, *Req) (*Resp, error), name string) grpc.MethodDesc {
	return grpc.MethodDesc{
		MethodName: name,
		Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			req := new(Req)
			if err := dec(req); err != nil {
				return nil, err
			}
			run := func(ctx context.Context, r any) (any, error) { return call(srv.(Server), ctx, r.(*Req)) }
			if ic == nil {
				return run(ctx, req)
			}
			return ic(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/" + ServiceName + "/" + name}, run)
		},
	}
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: ServiceName,
	HandlerType: (*Server)(nil),
	Methods: []grpc.MethodDesc{
		handler(Server.Start, "Start"),
		handler(Server.Status, "Status"),
		handler(Server.Cutover, "Cutover"),
		handler(Server.ReplayTo, "ReplayTo"),
		handler(Server.Cutback, "Cutback"),
	},
	Metadata: "quantykube/store/mirror/v1",
}
