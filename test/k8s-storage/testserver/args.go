package testserver

import (
	"fmt"
	"os"
	"strconv"

	"go.etcd.io/etcd/server/v3/embed"
)

// server names the binary RunEtcd starts and how to call it.
type server struct {
	kind string // "quantykube" or "etcd"
	bin  string
}

// serverFromEnv reads QK_K8S_STORAGE_SERVER and the matching binary variable.
func serverFromEnv() (server, error) {
	kind := os.Getenv("QK_K8S_STORAGE_SERVER")
	switch kind {
	case "", "quantykube":
		bin := os.Getenv("QK_STORE_BIN")
		if bin == "" {
			return server{}, fmt.Errorf("QK_STORE_BIN is not set; run test/k8s-storage/run.sh or set it to a quantykube binary")
		}
		return server{kind: "quantykube", bin: bin}, nil
	case "etcd":
		bin := os.Getenv("QK_ETCD")
		if bin == "" {
			return server{}, fmt.Errorf("QK_ETCD is not set; run test/k8s-storage/run.sh --against-etcd or eval \"$(scripts/deps.sh env etcd)\"")
		}
		return server{kind: "etcd", bin: bin}, nil
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
// in pkg/storage/etcd3 or pkg/storage/cacher sets them.
func (s server) args(cfg *embed.Config) []string {
	client := cfg.ListenClientUrls[0].String()
	switch s.kind {
	case "etcd":
		peer := cfg.ListenPeerUrls[0].String()
		a := []string{
			"--name", cfg.Name,
			"--data-dir", cfg.Dir,
			"--listen-client-urls", client,
			"--advertise-client-urls", client,
			"--listen-peer-urls", peer,
			"--initial-advertise-peer-urls", peer,
			"--initial-cluster", cfg.Name + "=" + peer,
			"--log-level", "warn",
			"--watch-progress-notify-interval", cfg.WatchProgressNotifyInterval.String(),
		}
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
		if cfg.UnsafeNoFsync {
			a = append(a, "--unsafe-no-fsync")
		}
		if cfg.WatchProgressNotifyInterval != defaultProgressNotify {
			a = append(a, "--watch-progress-notify-interval", cfg.WatchProgressNotifyInterval.String())
		}
		return a
	}
}
