package mirror

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// keepAlives renews the leases an etcd target holds until each is stopped
// or etcd answers that it is gone. The target must never expire a lease by
// itself while a replay runs (the source's expiry arrives as a revision).
//
// clientv3's KeepAlive is not used: it gives a lease up for good once no
// renewal was answered for one TTL (its deadline loop) and never tries
// again, while etcd may still hold the lease — a new leader gives every
// lease a fresh TTL at its election — and then expires it with nobody
// renewing: a revision the source never made. In CI's HA undo a 15 s API
// server lease went that way while the restored members elected on a
// loaded node ("revision 521179 made revision 521181", a divergence).
//
// Here each lease is renewed every TTL/3 (the cadence clientv3 uses) and a
// renewal that failed, for any reason but the lease being gone, is tried
// again after retryEvery, on a new stream, so through another endpoint.
type keepAlives struct {
	renew func(ctx context.Context, id int64) (ttl int64, err error)

	mu     sync.Mutex
	leases map[int64]*keptLease
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

type keptLease struct {
	next     time.Time
	inFlight bool
}

const (
	// keepTick is how often due renewals are looked for.
	keepTick = 250 * time.Millisecond
	// renewTimeout bounds one renewal; retryEvery is the pause before a
	// failed one is tried again.
	renewTimeout = 3 * time.Second
	retryEvery   = 500 * time.Millisecond
)

func newKeepAlives(cli *clientv3.Client) *keepAlives {
	return startKeepAlives(func(ctx context.Context, id int64) (int64, error) {
		resp, err := cli.KeepAliveOnce(ctx, clientv3.LeaseID(id))
		if err != nil {
			return 0, err
		}
		return resp.TTL, nil
	})
}

func startKeepAlives(renew func(ctx context.Context, id int64) (int64, error)) *keepAlives {
	ctx, cancel := context.WithCancel(context.Background())
	k := &keepAlives{renew: renew, leases: map[int64]*keptLease{}, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go k.loop()
	return k
}

// keep starts renewing lease id (the first renewal at once); keeping a
// lease already kept changes nothing.
func (k *keepAlives) keep(id int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ctx.Err() != nil || k.leases[id] != nil {
		return
	}
	k.leases[id] = &keptLease{}
}

// stop ends the renewals of lease id (one in flight may still land).
func (k *keepAlives) stop(id int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.leases, id)
}

// kept reports whether lease id is still renewed.
func (k *keepAlives) kept(id int64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.leases[id] != nil
}

// close stops every renewal and waits for the loop to end.
func (k *keepAlives) close() {
	k.cancel()
	<-k.done
}

func (k *keepAlives) loop() {
	defer close(k.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(keepTick)
	defer tick.Stop()
	for {
		select {
		case <-k.ctx.Done():
			return
		case now := <-tick.C:
			for _, id := range k.due(now) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					k.renewOne(id)
				}()
			}
		}
	}
}

// due marks the leases whose renewal is due as in flight and returns them.
func (k *keepAlives) due(now time.Time) []int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []int64
	for id, l := range k.leases {
		if !l.inFlight && !now.Before(l.next) {
			l.inFlight = true
			out = append(out, id)
		}
	}
	return out
}

func (k *keepAlives) renewOne(id int64) {
	ctx, cancel := context.WithTimeout(k.ctx, renewTimeout)
	ttl, err := k.renew(ctx, id)
	cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.leases[id]
	if l == nil {
		return // stopped meanwhile
	}
	l.inFlight = false
	switch {
	case err == nil && ttl > 0:
		l.next = time.Now().Add(max(time.Duration(ttl)*time.Second/3, retryEvery))
	case err == nil || errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseNotFound):
		// Gone from etcd: revoked by the replay, or expired there — then
		// the replay's next revision on its keys reports the divergence.
		delete(k.leases, id)
	default:
		l.next = time.Now().Add(retryEvery)
	}
}
