package mirror

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

// checkPeer validates a peer as given on the command line; role is "source"
// or "target" (the flags are --<role>-endpoints, --<role>-cacert, ...).
// It reads the files, so it also tells whether this member can use them.
func checkPeer(p api.Peer, role string) error {
	if len(p.Endpoints) == 0 {
		return fmt.Errorf("--%s-endpoints is empty; pass the %s cluster's client URLs, such as https://10.0.0.1:2379,https://10.0.0.2:2379", role, role)
	}
	https := false
	for _, e := range p.Endpoints {
		u, err := url.Parse(e)
		if err != nil || u.Host == "" || u.Scheme != "https" && u.Scheme != "http" {
			return fmt.Errorf("--%s-endpoints %q is not a client URL; use the form https://10.0.0.1:2379", role, e)
		}
		https = https || u.Scheme == "https"
	}
	if https && p.CAFile == "" {
		return fmt.Errorf("--%s-cacert is empty; pass the CA file that signs the %s's server certificates (kubeadm: /etc/kubernetes/pki/etcd/ca.crt)", role, role)
	}
	if (p.CertFile == "") != (p.KeyFile == "") {
		return fmt.Errorf("--%s-cert and --%s-key go together; pass both (kubeadm: /etc/kubernetes/pki/apiserver-etcd-client.crt and .key)", role, role)
	}
	for flag, f := range map[string]string{"cacert": p.CAFile, "cert": p.CertFile, "key": p.KeyFile} {
		if f == "" {
			continue
		}
		if _, err := os.ReadFile(f); err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return fmt.Errorf("--%s-%s %s cannot be read here (%v); pass a readable PEM file that exists at the same path on every member", role, flag, f, err)
		}
	}
	return nil
}

func samePeer(a, b *api.Peer) bool {
	if a == nil || b == nil {
		return a == b
	}
	ea, eb := slices.Clone(a.Endpoints), slices.Clone(b.Endpoints)
	slices.Sort(ea)
	slices.Sort(eb)
	return slices.Equal(ea, eb) && a.CAFile == b.CAFile && a.CertFile == b.CertFile && a.KeyFile == b.KeyFile
}

func peerKey(p api.Peer) string {
	e := slices.Clone(p.Endpoints)
	slices.Sort(e)
	return fmt.Sprint(e, p.CAFile, p.CertFile, p.KeyFile)
}

// maxCallBytes bounds one request to a peer: a replayed revision holds at
// most one request's worth of values (etcd's 1.5 MiB) plus its compares.
const maxCallBytes = 4 << 20

// newClient connects to a peer. It does not block: a peer that is down is
// found by the first call.
func newClient(p api.Peer) (*clientv3.Client, error) {
	var tlsCfg *tls.Config
	for _, e := range p.Endpoints {
		if u, err := url.Parse(e); err == nil && u.Scheme == "https" {
			info := transport.TLSInfo{CertFile: p.CertFile, KeyFile: p.KeyFile, TrustedCAFile: p.CAFile}
			c, err := info.ClientConfig()
			if err != nil {
				return nil, fmt.Errorf("TLS for %v: %w", p.Endpoints, err)
			}
			tlsCfg = c
			break
		}
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: p.Endpoints, TLS: tlsCfg, DialTimeout: 5 * time.Second,
		DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: 5 * time.Second,
		MaxCallSendMsgSize: maxCallBytes, Logger: zap.NewNop(),
		// A peer that was down is reached within a second of coming back:
		// gRPC's default reconnect back-off grows to 2 minutes, and a
		// restored etcd expires the leases nobody renews (restore-etcd).
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 5 * time.Second,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("connect to %v: %w", p.Endpoints, err)
	}
	return cli, nil
}
