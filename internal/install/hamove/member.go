package hamove

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quantyroot/quantykube/internal/install/storemove"
	"github.com/quantyroot/quantykube/internal/install/systemd"
	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

// storeToken is the store cluster's --initial-cluster-token (part of its
// member and cluster ids; etcd's is another, so the two never mix).
const storeToken = "quantykube-store"

// initialClusterFile keeps the --initial-cluster a member was started with.
func (p Paths) initialClusterFile(step string) string {
	return filepath.Join(p.stepDir(step), "initial-cluster")
}

// memberUnit is the store member's unit on this node: clients on
// 127.0.0.1 (the API server) and on the node's address (the other nodes'
// steps), peers on the node's address with etcd's peer certificates.
func (n *Node) memberUnit(initialCluster, state string) systemd.Unit {
	p, f := n.Paths, n.facts
	listen := p.LocalURL() + "," + f.ClientURL(p)
	if p.LocalURL() == f.ClientURL(p) {
		listen = p.LocalURL()
	}
	return systemd.Unit{Name: p.Unit, Content: fmt.Sprintf(`[Unit]
Description=QuantyKube store member %[2]s: the etcd v3 API kube-apiserver runs on
Documentation=https://github.com/quantyroot/quantykube
After=network.target

[Service]
ExecStart=%[1]s store --name %[2]s --data-dir %[3]s --listen-client-urls %[4]s --advertise-client-urls %[5]s --listen-metrics-urls %[6]s --cert-file %[7]s --key-file %[8]s --trusted-ca-file %[9]s --client-cert-auth --listen-peer-urls %[10]s --initial-advertise-peer-urls %[10]s --initial-cluster %[11]s --initial-cluster-state %[12]s --initial-cluster-token %[13]s --peer-cert-file %[14]s --peer-key-file %[15]s --peer-trusted-ca-file %[9]s --peer-client-cert-auth
Restart=always
RestartSec=1s
TimeoutStopSec=10s

[Install]
WantedBy=multi-user.target
`, p.Binary, f.Name, p.DataDir, listen, f.ClientURL(p), p.MetricsURL, p.ServerCert(), p.ServerKey(), p.EtcdCA(),
		f.PeerURL(p), initialCluster, state, storeToken, p.peerCert(), p.peerKey())}
}

// startMember installs the binary and the member's unit with the
// --initial-cluster recorded for step, and waits until the local member
// serves as a mirror.
func (n *Node) startMember(ctx context.Context, step, state string) error {
	ic, err := os.ReadFile(n.Paths.initialClusterFile(step))
	if err != nil {
		return fmt.Errorf("read the recorded --initial-cluster: %w", err)
	}
	if !n.BinaryGiven {
		if err := storemove.InstallBinary(n.Paths.Binary); err != nil {
			return err
		}
	}
	if err := n.Units.Install(ctx, n.memberUnit(strings.TrimSpace(string(ic)), state)); err != nil {
		return err
	}
	return n.waitMirror(ctx)
}

// Waits on the store: memberStartTimeout for a started member to serve
// (a joining one receives the whole state first), levelTimeout for the
// mirror to reach etcd's revision.
const (
	memberStartTimeout = 2 * time.Minute
	levelTimeout       = 2 * time.Minute
	poll               = 200 * time.Millisecond
)

// waitMirror waits until the local member serves in mirror mode.
func (n *Node) waitMirror(ctx context.Context) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, poll, memberStartTimeout, true, func(ctx context.Context) (bool, error) {
		st, err := n.mirrorStatus(ctx)
		if last = err; err != nil {
			return false, nil
		}
		if st.Failed != "" {
			return false, fmt.Errorf("the store's mirror failed: %s", st.Failed)
		}
		if st.Mode != api.Mirror {
			last = fmt.Errorf("mode %s", st.Mode)
			return false, nil
		}
		return true, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return fmt.Errorf("the local store member did not serve as a mirror within %v: %v (see journalctl -u %s)", memberStartTimeout, last, n.Paths.Unit)
	}
	return err
}

// waitLevel waits until the local member has applied the revision its
// peer (etcd while mirroring) had when the wait began, and prints it.
func (n *Node) waitLevel(ctx context.Context) error {
	start := time.Now()
	var want int64
	var last *api.Status
	err := wait.PollUntilContextTimeout(ctx, poll, levelTimeout, true, func(ctx context.Context) (bool, error) {
		st, err := n.mirrorStatus(ctx)
		if err != nil {
			return false, nil
		}
		last = st
		if st.Failed != "" {
			return false, fmt.Errorf("the store's mirror failed: %s; roll back (undo the steps) and start over", st.Failed)
		}
		if st.PeerError != "" || st.PeerRevision == 0 {
			return false, nil
		}
		if want == 0 {
			want = st.PeerRevision
		}
		return st.AppliedRevision >= want, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return fmt.Errorf("the local store member did not reach etcd's revision %d within %v (status %+v)", want, levelTimeout, last)
	}
	if err == nil {
		fmt.Fprintf(n.Out, "  the local member %s is level with etcd at revision %d (%v)\n", n.facts.Name, want, time.Since(start).Round(time.Millisecond))
	}
	return err
}

func (n *Node) removeMember(ctx context.Context) error {
	return n.Units.Remove(ctx, n.Paths.Unit)
}
