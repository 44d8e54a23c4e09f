// Package hostrun is what the operator's short-lived host pods run: it puts
// this binary on the host, starts `quantykube install|undo store|runtime` there
// as a transient systemd unit (so the work survives the pod), and follows the
// host journal of that subject until the run finishes or the pod is killed.
//
// Invariants:
//   - It never starts a run blindly: the journal and the unit are read first.
//     A run already active is followed; a run already finished for the asked
//     operation is reported; an interrupted one is started again, which the
//     installers define as "finish or roll back" (ADR 005).
//   - The result is the pod's termination message: one JSON Result, so the
//     operator reads it from the pod status without log access.
//   - The host is reached through /proc/1/root (the pod has hostPID), which is
//     the host's root in the host's mount namespace whatever the runtime does
//     with volume mounts (ADR 201).
package hostrun
