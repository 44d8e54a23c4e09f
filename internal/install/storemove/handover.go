package storemove

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/quantyroot/quantykube/internal/install/staticpod"
	"github.com/quantyroot/quantykube/internal/install/systemd"
	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// handover records where the data went at each switch, so a later run can
// tell what the store holds that etcd never had: every store revision above
// MovedAt, until an undo copied them back (UndoneAt).
type handover struct {
	// Etcd is etcd's client URL the API server used before the move.
	Etcd string `json:"etcd"`
	// MovedAt is etcd's final revision, the store's first: the API server
	// switched onto the store there.
	MovedAt int64 `json:"movedAt"`
	// UndoneAt is the store's last revision, copied into etcd by the last
	// undo (0 while the store serves).
	UndoneAt int64 `json:"undoneAt,omitempty"`
}

func (p Paths) handoverFile() string { return filepath.Join(p.StateDir, "handover.json") }

func (p Paths) readHandover() (handover, error) {
	var h handover
	b, err := os.ReadFile(p.handoverFile())
	if errors.Is(err, os.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return h, fmt.Errorf("read %s: %w", p.handoverFile(), err)
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("%s is damaged (%v); it records the revisions of the last move", p.handoverFile(), err)
	}
	return h, nil
}

func (p Paths) writeHandover(h handover) error {
	b, _ := json.Marshal(h)
	if err := staticpod.WriteAtomic(p.handoverFile(), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("record the handover: %w", err)
	}
	return nil
}

// DivergedError says that the API server was pointed away from the store
// behind QuantyKube's back while the journal records it on the store:
// what happened, which side holds what, and what to do. Nothing was changed.
type DivergedError struct {
	Endpoint string // where the API server's manifest points now
	MovedAt  int64  // the revision the store took over at
	StoreRev int64  // the store's revision now (-1: unknown)
	EtcdRev  int64  // etcd's revision now (-1: unknown)
}

func (e *DivergedError) Error() string {
	store := fmt.Sprintf("the store holds revisions %d–%d that etcd never had", e.MovedAt+1, e.StoreRev)
	keep := "keep the store's: `quantykube install store --reattach` (etcd's writes since are dropped; etcd is saved to a snapshot file first)"
	switch {
	case e.StoreRev < 0:
		store = "the store's revision cannot be read (is the quantykube-store unit running?)"
	case e.StoreRev <= e.MovedAt:
		store = fmt.Sprintf("the store holds nothing etcd lacks (revision %d)", e.StoreRev)
	}
	etcd := fmt.Sprintf("etcd is at revision %d (it was at %d when the API server moved)", e.EtcdRev, e.MovedAt)
	if e.EtcdRev < 0 {
		etcd = "etcd does not answer"
	}
	return fmt.Sprintf("the API server was pointed back at %s behind QuantyKube's back: %s; %s; nothing was changed. To %s; to keep etcd's: `quantykube undo store --keep-etcd` (the store's data is set aside, not deleted)",
		e.Endpoint, store, etcd, keep)
}

// stands checks that the API server runs where the journal says it does,
// on the store; when its manifest points elsewhere it returns a
// *DivergedError with both sides' revisions. It changes nothing.
func (m *Mover) stands(ctx context.Context) error {
	manifest, err := os.ReadFile(m.Paths.APIServerManifest())
	if err != nil {
		return fmt.Errorf("read %s: %w; the API server's manifest is gone, put it back (it was saved in %s)", m.Paths.APIServerManifest(), unwrap(err), m.Paths.StateDir)
	}
	ep, _ := staticpod.Flag(manifest, "etcd-servers")
	if ep == StoreURL {
		return nil
	}
	h, err := m.Paths.readHandover()
	if err != nil {
		return err
	}
	return &DivergedError{Endpoint: ep, MovedAt: h.MovedAt, StoreRev: m.storeRevision(ctx), EtcdRev: m.revisionAt(ctx, ep)}
}

// storeRevision reads the store's revision: from the running unit, or from
// its data dir when the unit is stopped. -1 if neither answers.
func (m *Mover) storeRevision(ctx context.Context) int64 {
	if systemd.Active(ctx, UnitName) {
		return m.revisionAt(ctx, StoreURL)
	}
	if _, err := os.Stat(m.Paths.DataDir); err != nil {
		return -1
	}
	// Expiry held: reading must not revoke a lease that ran out while the
	// store was stopped (that would be a revision of its own).
	st, err := mvcc.Open(m.Paths.DataDir, mvcc.Options{Logger: m.Log, HoldLeases: true})
	if err != nil {
		return -1
	}
	defer st.Close()
	return st.Rev()
}

// revisionAt reads the revision of the etcd API at endpoint, -1 on error.
func (m *Mover) revisionAt(ctx context.Context, endpoint string) int64 {
	cli, err := m.Paths.Dial(endpoint)
	if err != nil {
		return -1
	}
	defer cli.Close()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := cli.Get(cctx, "health")
	if err != nil {
		return -1
	}
	return resp.Header.Revision
}

// Verify reports whether the state the journal records still holds on this
// node (what the operator's host pods ask before they trust a finished
// journal): nil, or the refusal that names what happened and what to do.
func (m *Mover) Verify(ctx context.Context) error {
	st, err := m.subject().Journal.State()
	if err != nil {
		return err
	}
	if !st.Installed {
		return nil
	}
	return m.stands(ctx)
}
