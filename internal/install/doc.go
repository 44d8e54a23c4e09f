// Package install runs host-level moves (`quantykube install|undo
// store|runtime`) as journaled steps.
//
// Every step is written to an append-only journal (one JSON line per
// record, fsynced) before it starts and after it ends. A failing step makes
// the runner undo every step that began, newest first, and record the
// rollback. A run that was interrupted (kill -9, reboot) is recognised by
// the next run from its journal: steps that began are undone, unless the
// interrupted run had begun its commit step (the point after which the new
// state serves traffic), in which case the next run finishes it instead.
// Either way the host never stays half moved.
//
// Invariants:
//   - Undo functions are idempotent and work from a fresh process: they find
//     what they must put back at fixed paths under the state directory, never
//     in memory.
//   - At most one run per subject at a time (an flock on the subject's lock).
package install
