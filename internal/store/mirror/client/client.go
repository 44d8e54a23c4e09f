// Package client calls a store member's mirror admin service (package
// mirror/api) over the member's client port, with the client certificate
// the etcd API takes: what `quantykube store mirror ...` and the host steps
// use.
package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

// Client is a connection to one member.
type Client struct {
	cc *grpc.ClientConn
}

// Files are the TLS files of the connection (etcdctl's --cacert, --cert,
// --key).
type Files struct {
	CAFile, CertFile, KeyFile string
}

// Dial connects to a member's client URL (https://127.0.0.1:2479). It does
// not block; the first call finds a member that is down.
func Dial(endpoint string, f Files) (*Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || u.Scheme != "https" && u.Scheme != "http" {
		return nil, fmt.Errorf("--endpoints %q is not a client URL; use the form https://127.0.0.1:2479", endpoint)
	}
	creds := insecure.NewCredentials()
	if u.Scheme == "https" {
		if f.CAFile == "" {
			return nil, errors.New("--cacert is empty; pass the CA that signs the store's server certificate (kubeadm: /etc/kubernetes/pki/etcd/ca.crt)")
		}
		info := transport.TLSInfo{CertFile: f.CertFile, KeyFile: f.KeyFile, TrustedCAFile: f.CAFile}
		cfg, err := info.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("TLS files for %s: %w", endpoint, err)
		}
		creds = credentials.NewTLS(cfg)
	}
	return dial(u.Host, creds)
}

// New connects with a TLS configuration of the caller's (nil: plain).
func New(endpoint string, cfg *tls.Config) (*Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%q is not a client URL; use the form https://127.0.0.1:2479", endpoint)
	}
	creds := insecure.NewCredentials()
	if cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	return dial(u.Host, creds)
}

func dial(host string, creds credentials.TransportCredentials) (*Client, error) {
	cc, err := grpc.NewClient(host, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.CallContentSubtype(api.Codec)))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", host, err)
	}
	return &Client{cc: cc}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.cc.Close() }

func call[Req, Resp any](ctx context.Context, c *Client, method string, req *Req) (*Resp, error) {
	resp := new(Resp)
	if err := c.cc.Invoke(ctx, "/"+api.ServiceName+"/"+method, req, resp); err != nil {
		return nil, Error(err)
	}
	return resp, nil
}

// CallError is a call's error: the member's one line, and its gRPC code.
type CallError struct {
	Code codes.Code
	Msg  string
}

func (e *CallError) Error() string { return e.Msg }

// Error turns a call's error into a CallError.
func Error(err error) error {
	if s, ok := status.FromError(err); ok {
		return &CallError{Code: s.Code(), Msg: s.Message()}
	}
	return err
}

// Start makes the member's store a mirror of a source (api.StartRequest).
func (c *Client) Start(ctx context.Context, r api.StartRequest) (*api.Status, error) {
	return call[api.StartRequest, api.Status](ctx, c, "Start", &r)
}

// Status returns the member's view of the mirror.
func (c *Client) Status(ctx context.Context) (*api.Status, error) {
	return call[api.StatusRequest, api.Status](ctx, c, "Status", &api.StatusRequest{})
}

// Cutover makes the mirror the owner; the call returns the pause.
func (c *Client) Cutover(ctx context.Context, r api.TransitionRequest) (*api.TransitionResult, error) {
	return call[api.TransitionRequest, api.TransitionResult](ctx, c, "Cutover", &r)
}

// ReplayTo makes the owner replay onto a target (api.ReplayToRequest).
func (c *Client) ReplayTo(ctx context.Context, r api.ReplayToRequest) (*api.Status, error) {
	return call[api.ReplayToRequest, api.Status](ctx, c, "ReplayTo", &r)
}

// Cutback makes the owner a mirror of its target; the call returns the pause.
func (c *Client) Cutback(ctx context.Context, r api.TransitionRequest) (*api.TransitionResult, error) {
	return call[api.TransitionRequest, api.TransitionResult](ctx, c, "Cutback", &r)
}

// Unreachable reports whether err means the member did not answer (another
// member may), rather than a refusal.
func Unreachable(err error) bool {
	var ce *CallError
	return errors.As(err, &ce) && ce.Code == codes.Unavailable
}
