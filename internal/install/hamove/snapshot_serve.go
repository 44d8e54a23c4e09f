package hamove

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/quantyroot/quantykube/internal/install/etcdrestore"
	"github.com/quantyroot/quantykube/internal/install/storemove"
	"github.com/quantyroot/quantykube/internal/install/systemd"
)

// Undo restores every etcd member from one snapshot, the one replay-to saved
// on the first node. The other nodes fetch it from there themselves: replay-to
// starts a small HTTPS server on the first node (SnapshotServer, its own
// unit) and restore-etcd on a node without the file downloads it. Nobody
// copies files between nodes by hand, and the operator needs no node-to-node
// path of its own (ADR 202).
//
// Invariants:
//   - Both ends authenticate with etcd's peer certificates and CA (kubeadm
//     gives every control-plane node one, with its address): only another
//     etcd peer of this cluster can read the snapshot, which holds what
//     etcd's peer port already carries.
//   - The server serves the one file it was started with, read-only; it
//     stops with cutback (the snapshot's use ends there), with replay-to's
//     rollback, or at the latest after SnapshotServeFor.
//   - A fetched file is written beside its place, synced, and renamed into
//     place only once etcdutl reads it at the revision the store replays
//     from: a file at the default path is always whole and the right one.

// SnapshotServePath is the URL path the snapshot is served at.
const SnapshotServePath = "/replay-to/store.db"

// SnapshotServeFor bounds the snapshot server's life: an undo that stopped
// between replay-to and cutback does not leave it running for ever.
const SnapshotServeFor = 2 * time.Hour

// SnapshotServer serves File over HTTPS on Listen to clients with a
// certificate CAFile signed, with CertFile and KeyFile as its own.
type SnapshotServer struct {
	File, Listen              string
	CertFile, KeyFile, CAFile string
	For                       time.Duration // 0: until ctx ends
	Log                       *slog.Logger
}

// Serve serves until ctx ends or For has passed.
func (s SnapshotServer) Serve(ctx context.Context) error {
	if _, err := os.Stat(s.File); err != nil {
		return fmt.Errorf("the snapshot to serve: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
	if err != nil {
		return fmt.Errorf("load the server certificate: %w", err)
	}
	pool, err := loadPool(s.CAFile)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.Listen, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(SnapshotServePath, func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(s.File)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if s.Log != nil {
			s.Log.Info("snapshot requested", "from", r.RemoteAddr, "method", r.Method, "bytes", fi.Size())
		}
		http.ServeContent(w, r, filepath.Base(s.File), fi.ModTime(), f)
	})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientCAs:    pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
		},
	}
	if s.For > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.For)
		defer cancel()
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-done:
		return fmt.Errorf("serve the snapshot: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}

func loadPool(caFile string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read the CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	return pool, nil
}

// snapshotListen is where this node serves replay-to's snapshot.
func (n *Node) snapshotListen() string {
	return net.JoinHostPort(n.facts.Address, n.Paths.SnapshotPort)
}

// snapshotUnit is the snapshot server's unit on the node that ran replay-to.
func (n *Node) snapshotUnit() systemd.Unit {
	p := n.Paths
	return systemd.Unit{Name: p.SnapshotUnit, Content: fmt.Sprintf(`[Unit]
Description=QuantyKube: the store snapshot etcd's members are restored from, for the other control-plane nodes' restore-etcd
Documentation=https://github.com/quantyroot/quantykube
After=network.target

[Service]
ExecStart=%s store serve-snapshot %s --listen %s --cert-file %s --key-file %s --trusted-ca-file %s --for %s
Restart=on-failure
RestartSec=1s

[Install]
WantedBy=multi-user.target
`, n.serveBinary(), p.replayedSnapshot(), n.snapshotListen(), p.peerCert(), p.peerKey(), p.EtcdCA(), SnapshotServeFor)}
}

// serveBinary is the binary the snapshot server runs: this one, copied
// beside the snapshot (the store's installed binary may be an earlier
// release's, from when the move was made, without serve-snapshot).
func (n *Node) serveBinary() string {
	if n.BinaryGiven {
		return n.Paths.Binary
	}
	return filepath.Join(n.Paths.stepDir(StepReplayTo), "quantykube")
}

func (n *Node) serveSnapshotDo(ctx context.Context) error {
	if !n.BinaryGiven {
		if err := storemove.InstallBinary(n.serveBinary()); err != nil {
			return err
		}
	}
	if err := n.Units.Install(ctx, n.snapshotUnit()); err != nil {
		return fmt.Errorf("start the snapshot server: %w", err)
	}
	// Serving before the step is done: the other nodes' restore-etcd may
	// start the moment replay-to is.
	for deadline := time.Now().Add(30 * time.Second); ; {
		if etcdrestore.Listening(n.snapshotListen()) {
			fmt.Fprintf(n.Out, "  the snapshot is served to the other control-plane nodes on %s until cutback\n", n.snapshotListen())
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the snapshot server (unit %s) does not listen on %s after 30 s", n.Paths.SnapshotUnit, n.snapshotListen())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

func (n *Node) stopServingDo(ctx context.Context) error {
	if err := n.Units.Remove(ctx, n.Paths.SnapshotUnit); err != nil {
		return fmt.Errorf("stop the snapshot server: %w", err)
	}
	if !n.BinaryGiven {
		if err := os.Remove(n.serveBinary()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove the snapshot server's binary: %w", err)
		}
	}
	return nil
}

// snapshotClient is an HTTPS client with this node's etcd peer certificate.
func (n *Node) snapshotClient() (*http.Client, error) {
	cert, err := tls.LoadX509KeyPair(n.Paths.peerCert(), n.Paths.peerKey())
	if err != nil {
		return nil, fmt.Errorf("load etcd's peer certificate: %w", err)
	}
	pool, err := loadPool(n.Paths.EtcdCA())
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12},
		DialContext:         (&net.Dialer{Timeout: 3 * time.Second}).DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
	}
	return &http.Client{Transport: tr}, nil
}

// snapshotSources are the URLs the other control-plane nodes would serve
// replay-to's snapshot at (every etcd member's address but this node's, from
// the member list stop-etcd saved: the local member is stopped).
func (n *Node) snapshotSources() ([]string, error) {
	ms, err := n.savedEtcdMembers()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		host := hostOf(m.ClientURL)
		if host == "" || host == n.facts.Address {
			continue
		}
		out = append(out, "https://"+net.JoinHostPort(host, n.Paths.SnapshotPort)+SnapshotServePath)
	}
	return out, nil
}

// findSnapshotSource is the first source that answers a HEAD for the
// snapshot; the error names each source's answer.
func (n *Node) findSnapshotSource(ctx context.Context) (string, error) {
	srcs, err := n.snapshotSources()
	if err != nil {
		return "", err
	}
	hc, err := n.snapshotClient()
	if err != nil {
		return "", err
	}
	defer hc.CloseIdleConnections()
	var why []string
	for _, u := range srcs {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		req, _ := http.NewRequestWithContext(cctx, http.MethodHead, u, nil)
		resp, err := hc.Do(req)
		cancel()
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", u, err))
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return u, nil
		}
		why = append(why, fmt.Sprintf("%s: %s", u, resp.Status))
	}
	if len(why) == 0 {
		return "", errors.New("no other etcd member is known")
	}
	return "", errors.New(strings.Join(why, "; "))
}

// fetchSnapshotDo downloads replay-to's snapshot to its default path, unless
// it is there already at the store's replay revision (the node that ran
// replay-to, a rerun, a copy made by hand, or the file --snapshot names).
func (n *Node) fetchSnapshotDo(ctx context.Context) error {
	st, err := n.mirrorStatus(ctx)
	if err != nil {
		return err
	}
	if have, err := n.haveSnapshot(ctx, st.Since); err != nil || have {
		return err
	}
	dst := n.Paths.replayedSnapshot()
	src, err := n.findSnapshotSource(ctx)
	if err != nil {
		return fmt.Errorf("no control-plane node serves the store's snapshot (%v): rerun `quantykube undo store --ha %s` on the node that ran it, or copy %s from there", err, StepReplayTo, dst)
	}
	t0 := time.Now()
	size, err := n.download(ctx, src, dst+".part")
	if err != nil {
		os.Remove(dst + ".part")
		return fmt.Errorf("fetch the store's snapshot from %s: %w", src, err)
	}
	rev, err := n.snapshotRevision(ctx, dst+".part")
	if err == nil && rev != st.Since {
		err = fmt.Errorf("it is at revision %d, the store replays from %d: rerun `quantykube undo store --ha %s` on the node that ran it", rev, st.Since, StepReplayTo)
	}
	if err != nil {
		os.Remove(dst + ".part")
		return fmt.Errorf("the snapshot fetched from %s: %w", src, err)
	}
	if err := os.Rename(dst+".part", dst); err != nil {
		return fmt.Errorf("move the fetched snapshot into place: %w", err)
	}
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return err
	}
	fmt.Fprintf(n.Out, "  fetched the store's snapshot (revision %d, %d bytes) from %s in %v\n", rev, size, src, time.Since(t0).Round(time.Millisecond))
	return nil
}

// unfetchSnapshotDo removes a snapshot the fetch put in place (the rerun
// fetches it again); a file named by --snapshot, or the one replay-to made
// on this node, is never removed.
func (n *Node) unfetchSnapshotDo(context.Context) error {
	if n.Snapshot != "" {
		return nil
	}
	if done, _ := n.Done(StepReplayTo); done {
		return nil
	}
	if err := os.Remove(n.Paths.replayedSnapshot()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the fetched snapshot: %w", err)
	}
	return nil
}

// download writes the body of GET src to path, synced; it returns its size.
func (n *Node) download(ctx context.Context, src, path string) (int64, error) {
	hc, err := n.snapshotClient()
	if err != nil {
		return 0, err
	}
	defer hc.CloseIdleConnections()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(cctx, http.MethodGet, src, nil)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s", resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return 0, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	size, err := io.Copy(f, resp.Body)
	if err == nil && resp.ContentLength >= 0 && size != resp.ContentLength {
		err = fmt.Errorf("got %d of %d bytes", size, resp.ContentLength)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return size, err
}

func hostOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
