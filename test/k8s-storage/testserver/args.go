package testserver

import (
	"fmt"
	"os"
	"strconv"

	"go.etcd.io/etcd/server/v3/embed"
)

// server names the binary RunEtcd starts, how to call it, and how many
// members each RunEtcd call starts.
type server struct {
	kind    string // "quantykube" or "etcd"
	bin     string
	members int // 1, or 3 for a replicated cluster per test
}

// serverFromEnv reads QK_K8S_STORAGE_SERVER, QK_K8S_STORAGE_MEMBERS and the
// matching binary variable.
func serverFromEnv() (server, error) {
	members := 1
	if v := os.Getenv("QK_K8S_STORAGE_MEMBERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || (n != 1 && n != 3) {
			return server{}, fmt.Errorf("QK_K8S_STORAGE_MEMBERS=%q is not a member count; use 1 or 3", v)
		}
		members = n
	}
	kind := os.Getenv("QK_K8S_STORAGE_SERVER")
	switch kind {
	case "", "quantykube":
		bin := os.Getenv("QK_STORE_BIN")
		if bin == "" {
			return server{}, fmt.Errorf("QK_STORE_BIN is not set; run test/k8s-storage/run.sh or set it to a quantykube binary")
		}
		return server{kind: "quantykube", bin: bin, members: members}, nil
	case "etcd":
		bin := os.Getenv("QK_ETCD")
		if bin == "" {
			return server{}, fmt.Errorf("QK_ETCD is not set; run test/k8s-storage/run.sh --against-etcd or eval \"$(scripts/deps.sh env etcd)\"")
		}
		return server{kind: "etcd", bin: bin, members: members}, nil
	default:
		return server{}, fmt.Errorf("QK_K8S_STORAGE_SERVER=%q is not a server; use quantykube or etcd", kind)
	}
}

// defaultProgressNotify is embed.NewConfig()'s WatchProgressNotifyInterval;
// quantykube gets the flag only when a test changed it, so the store's own
// default is what the other tests see.
var defaultProgressNotify = embed.NewConfig().WatchProgressNotifyInterval

// args translates the fields the suites set on cfg (UnsafeNoFsync,
// WatchProgressNotifyInterval, QuotaBackendBytes) and the URLs chosen by
// NewTestConfig into command-line flags. Other fields are ignored: no suite
// in pkg/storage/etcd3 or pkg/storage/cacher sets them. A member of a
// cluster (s.members > 1) gets etcd's clustering flags with cfg.InitialCluster
// naming every member, on the store as on etcd.
func (s server) args(cfg *embed.Config) []string {
	client := cfg.ListenClientUrls[0].String()
	switch s.kind {
	case "etcd":
		a := []string{
			"--name", cfg.Name,
			"--data-dir", cfg.Dir,
			"--listen-client-urls", client,
			"--advertise-client-urls", client,
			"--log-level", "warn",
			"--watch-progress-notify-interval", cfg.WatchProgressNotifyInterval.String(),
		}
		a = append(a, clusterArgs(cfg)...)
		if cfg.UnsafeNoFsync {
			a = append(a, "--unsafe-no-fsync")
		}
		if cfg.QuotaBackendBytes > 0 {
			a = append(a, "--quota-backend-bytes", strconv.FormatInt(cfg.QuotaBackendBytes, 10))
		}
		return a
	default:
		a := []string{"store",
			"--name", cfg.Name,
			"--data-dir", cfg.Dir,
			"--listen-client-urls", client,
		}
		if s.members > 1 {
			a = append(a, "--advertise-client-urls", client)
			a = append(a, clusterArgs(cfg)...)
		}
		if cfg.UnsafeNoFsync {
			a = append(a, "--unsafe-no-fsync")
		}
		if cfg.WatchProgressNotifyInterval != defaultProgressNotify {
			a = append(a, "--watch-progress-notify-interval", cfg.WatchProgressNotifyInterval.String())
		}
		return a
	}
}

// clusterArgs are etcd's flags that make cfg one member of cfg.InitialCluster.
func clusterArgs(cfg *embed.Config) []string {
	peer := cfg.ListenPeerUrls[0].String()
	return []string{
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", cfg.InitialCluster,
		"--initial-cluster-state", "new",
	}
}
