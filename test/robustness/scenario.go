package robustness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"go.etcd.io/etcd/tests/v3/robustness/client"
	"go.etcd.io/etcd/tests/v3/robustness/identity"
	"go.etcd.io/etcd/tests/v3/robustness/report"
	"go.etcd.io/etcd/tests/v3/robustness/traffic"
)

// scenario is one traffic profile of etcd's robustness suite.
type scenario struct {
	name    string
	traffic traffic.Traffic
	profile traffic.Profile
}

// scenarios are etcd's KubernetesLowTraffic and EtcdTrafficDeleteLeases
// profiles (scenarios.trafficProfiles in etcd's tests): the medium key-value
// rate (100–200 qps), watches and compaction every 200 ms. The high-rate
// profiles need more than this 2-core machine shares with other work.
func scenarios() []scenario {
	profile := traffic.Profile{
		KeyValue:   &traffic.KeyValueMedium,
		Watch:      &traffic.WatchDefault,
		Compaction: &traffic.CompactionDefault,
	}
	return []scenario{
		{name: "Kubernetes", traffic: traffic.Kubernetes, profile: profile},
		{name: "EtcdPutDeleteLease", traffic: traffic.EtcdPutDeleteLease, profile: profile},
	}
}

// trafficRun is what runTraffic recorded.
type trafficRun struct {
	reports   []report.ClientReport // key-value and watch traffic, then the collectors
	kills     []kill
	start     time.Duration // traffic start and end, since baseTime
	end       time.Duration
	maxRev    int64
	killerErr error
}

// runTraffic runs s's traffic through recording clients on every endpoint
// for duration while runKiller kills members, then writes a last key (the
// validators require the last operation to succeed) and collects every
// member's watch stream up to the highest revision the traffic saw.
func runTraffic(ctx context.Context, lg *zap.Logger, c *cluster, s scenario, kc killConfig, duration time.Duration) (trafficRun, error) {
	var run trafficRun
	baseTime := time.Now()
	ids := identity.NewIDProvider()
	trafficSet := client.NewSet(ids, baseTime)
	defer trafficSet.Close()
	watchSet := client.NewSet(ids, baseTime)
	defer watchSet.Close()
	endpoints := c.endpoints()

	if err := traffic.CheckEmptyDatabaseAtStart(ctx, lg, endpoints, trafficSet); err != nil {
		return run, fmt.Errorf("check the database is empty: %w", err)
	}
	maxRevision := make(chan int64, 1)
	collected := make(chan error, 1)
	// The collectors block on a member that never comes back (their
	// RequestProgress has no timeout); they get their own context, cancelled
	// when the run gives up on them, and a logger that outlives the test.
	collectCtx, stopCollecting := context.WithCancel(ctx)
	defer stopCollecting()
	go func() {
		collected <- client.CollectClusterWatchEvents(collectCtx, client.CollectClusterWatchEventsParam{
			Lg: zap.NewNop(), Endpoints: endpoints, MaxRevisionChan: maxRevision, ClientSet: watchSet})
	}()

	finish := make(chan struct{})
	var wg sync.WaitGroup
	// Some of etcd's traffic loops send requests without a timeout; they end
	// only with their context when a member never comes back.
	trafficCtx, cancelTraffic := context.WithCancel(ctx)
	defer cancelTraffic()
	run.start = time.Since(baseTime)
	if err := startLoops(trafficCtx, lg, &wg, s, endpoints, trafficSet, finish); err != nil {
		close(finish)
		wg.Wait()
		close(maxRevision)
		return run, err
	}
	killCtx, stopKiller := context.WithTimeout(ctx, duration)
	run.kills, run.killerErr = runKiller(killCtx, lg, c, kc, baseTime)
	<-killCtx.Done() // a killer error ends the kills early; the traffic still runs its time
	stopKiller()
	close(finish)
	if !waitGroupWithin(&wg, 10*time.Second) {
		lg.Warn("traffic loops still busy 10 s after the end; cancelling their requests")
		cancelTraffic()
		wg.Wait()
	}
	run.end = time.Since(baseTime)

	if run.killerErr != nil {
		// A member is down for good: its watch can never catch up. Closing
		// maxRevision without a value ends every collector; the traffic's
		// own reports are still validated.
		close(maxRevision)
		stopCollecting()
		select {
		case <-collected:
		case <-time.After(10 * time.Second):
			lg.Warn("watch collectors still blocked on the member that did not come back; leaving them")
		}
		run.reports = trafficSet.Reports()
		run.maxRev = report.OperationsMaxRevision(run.reports)
		return run, nil
	}
	if err := lastWrite(ctx, trafficSet, endpoints); err != nil {
		close(maxRevision)
		return run, err
	}
	run.reports = trafficSet.Reports()
	run.maxRev = report.OperationsMaxRevision(run.reports)
	maxRevision <- run.maxRev
	close(maxRevision)
	select {
	case err := <-collected:
		if err != nil {
			return run, fmt.Errorf("collect watch events from every member: %w", err)
		}
	case <-time.After(2 * time.Minute):
		stopCollecting()
		return run, errors.New("collecting watch events from every member took over 2 minutes")
	}
	run.reports = slices.Concat(run.reports, watchSet.Reports())
	return run, nil
}

// startLoops starts the key-value, watch and compaction loops of s, as
// traffic.SimulateTraffic does (which needs etcd's e2e cluster type).
func startLoops(ctx context.Context, lg *zap.Logger, wg *sync.WaitGroup, s scenario, endpoints []string,
	set *client.ClientSet, finish chan struct{}) error {
	kv := s.profile.KeyValue
	limiter := rate.NewLimiter(rate.Limit(kv.MaximalQPS), kv.BurstableQPS)
	keys := traffic.NewKeyStore(10, "key")
	storage := traffic.NewKubernetesStorage()
	err := traffic.SimulateKeyValueTraffic(ctx, wg, kv, endpoints, set, s.traffic, traffic.RunTrafficLoopParam{
		QPSLimiter:                         limiter,
		IDs:                                set.IdentityProvider(),
		LeaseIDStorage:                     identity.NewLeaseIDStorage(),
		NonUniqueRequestConcurrencyLimiter: traffic.NewConcurrencyLimiter(kv.MaxNonUniqueRequestConcurrency),
		KeyStore:                           keys,
		Storage:                            storage,
		Finish:                             finish,
	})
	if err != nil {
		return fmt.Errorf("start key-value traffic: %w", err)
	}
	if w := s.profile.Watch; w != nil {
		err = traffic.SimulateWatchTraffic(ctx, wg, w, endpoints, set, s.traffic, traffic.RunWatchLoopParam{
			Config: *w, QPSLimiter: limiter, KeyStore: keys, Storage: storage, Finish: finish, Logger: lg})
		if err != nil {
			return fmt.Errorf("start watch traffic: %w", err)
		}
	}
	if cp := s.profile.Compaction; cp != nil {
		err = traffic.SimulateCompactionTraffic(ctx, wg, cp, endpoints, set, s.traffic,
			traffic.RunCompactLoopParam{Period: cp.Period, Finish: finish})
		if err != nil {
			return fmt.Errorf("start compaction traffic: %w", err)
		}
	}
	return nil
}

// lastWrite puts the tombstone key through all endpoints, as etcd's suite
// does: validation needs the last operation to have succeeded. It retries
// for up to 30 s (a member restarted just before may still be catching up).
func lastWrite(ctx context.Context, set *client.ClientSet, endpoints []string) error {
	cc, err := set.NewClient(endpoints)
	if err != nil {
		return err
	}
	defer cc.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = cc.Put(pctx, "tombstone", "true")
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the last write (tombstone) failed for 30 s: %w", err)
		}
	}
}

// waitGroupWithin waits for wg for at most limit and says whether it finished.
func waitGroupWithin(wg *sync.WaitGroup, limit time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(limit):
		return false
	}
}
