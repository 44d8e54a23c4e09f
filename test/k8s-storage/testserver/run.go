package testserver

import (
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	storagetesting "k8s.io/apiserver/pkg/storage/testing"
)

// autoPortLock serialises RunEtcd calls that pick their own ports, as upstream does.
var autoPortLock sync.Mutex

// RunEtcd starts a fresh server process for cfg (NewTestConfig(t) when nil),
// or a fresh cluster of QK_K8S_STORAGE_MEMBERS members, and returns a client
// connected to it (to every member's endpoint), wrapped in the same recorders as the
// upstream package (the suites read them). The process is stopped when the
// test ends.
func RunEtcd(t testing.TB, cfg *embed.Config) *kubernetes.Client {
	t.Helper()
	srv, err := serverFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if cfg == nil {
		autoPortLock.Lock()
		defer autoPortLock.Unlock()
		cfg = NewTestConfig(t)
	}
	c := startCluster(t, srv, cfg)

	client, err := kubernetes.New(clientv3.Config{
		Endpoints:   c.endpoints(),
		DialTimeout: 10 * time.Second,
		Logger:      zaptest.NewLogger(t, zaptest.Level(zapcore.ErrorLevel)).Named("etcd-client"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	kubernetesRecorder := storagetesting.NewKubernetesRecorder(client.Kubernetes)
	client.KV = storagetesting.NewKVRecorder(client.KV, kubernetesRecorder)
	client.Kubernetes = kubernetesRecorder
	return client
}
