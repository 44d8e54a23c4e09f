package mirror

import (
	"context"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// keepAlives keeps leases of an etcd target alive with clientv3's shared
// keep-alive stream (a renewal every TTL/3), until stopped.
type keepAlives struct {
	cli    *clientv3.Client
	mu     sync.Mutex
	cancel map[int64]context.CancelFunc
	closed bool
}

func newKeepAlives(cli *clientv3.Client) *keepAlives {
	return &keepAlives{cli: cli, cancel: map[int64]context.CancelFunc{}}
}

// keep starts keeping lease id alive (once).
func (k *keepAlives) keep(id int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed || k.cancel[id] != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := k.cli.KeepAlive(ctx, clientv3.LeaseID(id)); err != nil {
		cancel()
		return
	}
	// clientv3 renews on schedule whether or not the responses are read;
	// nothing reads them here.
	k.cancel[id] = cancel
}

func (k *keepAlives) stop(id int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if c := k.cancel[id]; c != nil {
		c()
		delete(k.cancel, id)
	}
}

func (k *keepAlives) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	for id, c := range k.cancel {
		c()
		delete(k.cancel, id)
	}
}
