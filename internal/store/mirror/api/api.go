// Package api is the admin surface of a store's mirror (package mirror): the
// requests and answers of `quantykube store mirror start|status|cutover|
// replay-to|cutback`, and the gRPC service that carries them as JSON on the
// store's client port, behind the same TLS and client-certificate check as
// the etcd API.
//
// Every call is idempotent: a call repeated after a crash (of the caller or
// of a member) either finds its effect done and answers as the first call
// did, or does it. A refused call changes nothing and its error is one line
// naming the problem and the fix.
package api

import "time"

// Mode is one of the store's modes.
type Mode string

const (
	// Owner is the store as the source of truth (the default).
	Owner Mode = "owner"
	// Mirror replays a source cluster; writes are forwarded to it.
	Mirror Mode = "mirror"
	// ReplayingTo is an owner whose changes are also replayed onto a target.
	ReplayingTo Mode = "replaying-to"
)

// Peer is another etcd-API cluster: a mirror's source or a replay's target.
// The files must exist at the same paths on every member (each member
// connects from its own node).
type Peer struct {
	// Endpoints are the cluster's client URLs (https://10.0.0.1:2379, ...).
	Endpoints []string `json:"endpoints"`
	// CAFile verifies the peer's server certificates; CertFile and KeyFile
	// are the client certificate it accepts.
	CAFile   string `json:"caFile,omitempty"`
	CertFile string `json:"certFile,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
}

// StartRequest makes a store that holds exactly a source's state at its
// revision a mirror of that source.
type StartRequest struct {
	Source Peer `json:"source"`
	// Revision, when set, is the revision the caller restored the store at
	// (the snapshot's): a store at another revision is refused.
	Revision int64 `json:"revision,omitempty"`
}

// ReplayToRequest makes an owner replay its changes after Revision onto a
// target that holds (or will hold, once restored and started) exactly the
// store's state at Revision.
type ReplayToRequest struct {
	Target   Peer  `json:"target"`
	Revision int64 `json:"revision"`
	// Stop ends replaying (back to owner) instead; Target and Revision are
	// then ignored.
	Stop bool `json:"stop,omitempty"`
}

// TransitionRequest asks for a cut-over (mirror → owner) or a cut-back
// (replaying-to → mirror of the target).
type TransitionRequest struct {
	// Timeout bounds the pause: past it the transition is abandoned and
	// the mode stays as it was (default 5 s).
	Timeout time.Duration `json:"timeout,omitempty"`
}

// Pause is what a cut-over or cut-back held writes for.
type Pause struct {
	Op string `json:"op"`
	// Duration is from the leader's hold to its switch.
	Duration time.Duration `json:"duration"`
	// Revision is the revision the mode switched at.
	Revision int64     `json:"revision"`
	At       time.Time `json:"at"`
}

// TransitionResult is the outcome of a cut-over or cut-back.
type TransitionResult struct {
	Mode  Mode   `json:"mode"`
	Pause *Pause `json:"pause,omitempty"`
	// AlreadyDone is set when the transition had happened before the call.
	AlreadyDone bool `json:"alreadyDone,omitempty"`
}

// Hold is a transition in progress: writes are held.
type Hold struct {
	ID      string        `json:"id"`
	Op      string        `json:"op"`
	Timeout time.Duration `json:"timeout"`
	Started time.Time     `json:"started"`
}

// Status is one member's view of the mirror.
type Status struct {
	Member   string `json:"member"`
	Leader   string `json:"leader"`
	IsLeader bool   `json:"isLeader"`
	Mode     Mode   `json:"mode"`
	// Peer is the source (mirror) or the target (replaying-to).
	Peer *Peer `json:"peer,omitempty"`
	// Since is the revision the mode began at.
	Since int64  `json:"since,omitempty"`
	Epoch uint64 `json:"epoch"`
	Hold  *Hold  `json:"hold,omitempty"`
	// Failed is why the replay stopped for good (divergence, a compacted
	// source); the caller rolls back.
	Failed string `json:"failed,omitempty"`
	// AppliedRevision is this member's revision.
	AppliedRevision int64 `json:"appliedRevision"`
	// PeerRevision is the peer's current revision as this member reads it
	// now (0 if it cannot).
	PeerRevision int64 `json:"peerRevision,omitempty"`
	// Lag is how many revisions the replay's target is behind its source.
	Lag int64 `json:"lag"`
	// PeerError is why this member cannot read the peer's files or reach it.
	PeerError string `json:"peerError,omitempty"`
	// Replayer is the leader's replay (on the leader only).
	Replayer  *ReplayerStatus `json:"replayer,omitempty"`
	LastPause *Pause          `json:"lastPause,omitempty"`
	LastAbort string          `json:"lastAbort,omitempty"`
}

// ReplayerStatus is the state of the leader's replay.
type ReplayerStatus struct {
	Running bool `json:"running"`
	// TargetRevision is the revision the replay has made on its target.
	TargetRevision int64 `json:"targetRevision"`
	// LastError is the last error it restarted after.
	LastError string `json:"lastError,omitempty"`
}

// StatusRequest asks a member for its Status.
type StatusRequest struct{}
