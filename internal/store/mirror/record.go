package mirror

import (
	"encoding/json"
	"fmt"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// record is the mode as replicated and persisted (mvcc m/mode, JSON). An
// empty record is an owner that never mirrored.
type record struct {
	Mode api.Mode  `json:"mode"`
	Peer *api.Peer `json:"peer,omitempty"`
	// Since is the revision the mode began at: the revision both sides held
	// identically when the replay started.
	Since int64     `json:"since,omitempty"`
	Hold  *api.Hold `json:"hold,omitempty"`
	// Failed stops the replay for good (divergence, a compacted source).
	Failed    string     `json:"failed,omitempty"`
	LastPause *api.Pause `json:"lastPause,omitempty"`
	LastAbort string     `json:"lastAbort,omitempty"`
}

func decodeRecord(b []byte) (record, error) {
	if len(b) == 0 {
		return record{Mode: api.Owner}, nil
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return record{}, fmt.Errorf("decode the store's mode record: %w", err)
	}
	if r.Mode == "" {
		r.Mode = api.Owner
	}
	return r, nil
}

func (r record) encode() []byte {
	b, _ := json.Marshal(r)
	return b
}

// holdsLeases reports whether lease expiry stops in this mode: a mirror's
// leases belong to its source; during a cut-back no lease may expire
// between the drain and the switch.
func (r record) holdsLeases() bool {
	return r.Mode == api.Mirror || r.Hold != nil && r.Hold.Op == opCutback
}

// change is the mode change to r from epoch (at revision atRev, if set),
// with the effects r has on the store.
func (r record) change(epoch uint64, atRev int64) *mvcc.ModeChange {
	return &mvcc.ModeChange{Epoch: epoch, AtRev: atRev, Record: r.encode(), HoldLeases: r.holdsLeases(),
		AcceptReplay: r.Mode == api.Mirror && r.Failed == ""}
}

// replays reports whether the leader runs a replayer in this mode.
func (r record) replays() bool {
	return (r.Mode == api.Mirror || r.Mode == api.ReplayingTo) && r.Failed == "" && r.Peer != nil
}

const (
	opCutover = "cutover"
	opCutback = "cutback"
)
