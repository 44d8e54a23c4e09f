package replica

import (
	"context"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestPublishedAfterCatchUp: a member restarted behind the cluster publishes
// its attributes through the log before it may serve clients (etcd's
// publishV3 and ReadyNotify); once Published is closed it has applied every
// write the cluster acknowledged before its restart, and its name and client
// URLs are committed: each member lists them once it applied that entry (the
// leader's apply can trail the restarted member's own by a moment, so the
// leader's list is polled).
func TestPublishedAfterCatchUp(t *testing.T) {
	ms := newTestCluster(t, 3)
	for _, m := range ms {
		select {
		case <-m.rep.Published():
		case <-time.After(20 * time.Second):
			t.Fatalf("%s not published within 20 s", m.cfg.Name)
		}
	}
	lead := waitLeader(t, ms)
	behind := ms[(lead+1)%3]
	behind.stop()
	ctx := context.Background()
	var last int64
	for i := 0; i < 50; i++ {
		resp, err := ms[lead].store.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte{byte(i)}})
		if err != nil {
			t.Fatalf("put %d with a member down: %v", i, err)
		}
		last = resp.Header.Revision
	}
	behind.cfg.ClientURLs = []string{"http://127.0.0.1:2379"}
	behind.start(t)
	select {
	case <-behind.rep.Published():
	case <-time.After(20 * time.Second):
		t.Fatalf("restarted %s not published within 20 s", behind.cfg.Name)
	}
	if rev := behind.store.Rev(); rev < last {
		t.Fatalf("restarted %s published at revision %d, behind the acknowledged %d", behind.cfg.Name, rev, last)
	}
	var listed string
	deadline := time.Now().Add(10 * time.Second)
	for {
		members, err := ms[lead].rep.Members()
		if err != nil {
			t.Fatal(err)
		}
		ok := false
		for _, m := range members {
			if m.ID == behind.rep.ID() {
				listed = m.String()
				ok = m.Name == behind.cfg.Name && len(m.ClientURLs) == 1 && m.ClientURLs[0] == behind.cfg.ClientURLs[0]
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after it published, the leader lists the restarted member as %s, want its name and new client URL", listed)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
