package hamove

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/quantyroot/quantykube/internal/install"
)

// fault is install.Faults for the rig: the run of node step op fails after
// sub-step fail's Do, or is killed right after its journal records the
// begin of sub-step kill.
//
// A kill here is runtime.Goexit on the goroutine running the node step:
// nothing of the run executes after the journal line but its deferred
// closes and the release of the step's lock, which the kernel does for a
// process killed with SIGKILL too; its context is cancelled, and the rerun
// is a new Node that remembers nothing of it, as a new process would. The
// members and etcd the step started keep running, as systemd's units do
// when the command that started them dies. (The kubeadm cluster's
// TestHAMoveFaults, test/hamove, sends a real SIGKILL to the host command.)
type fault struct{ op, fail, kill string }

func (f fault) AfterDo(op, step string) error {
	if op == f.op && step == f.fail {
		return errors.New("fault injected")
	}
	return nil
}

func (f fault) AfterRecord(op, step, event string) {
	if op == f.op && step == f.kill && event == install.EventBegin {
		runtime.Goexit()
	}
}

// fresh replaces node i by a Node of the same configuration and no memory
// of earlier runs (what a new process of the host command is), keeping the
// last write pause seen on it for the checks after a cut-over or cut-back.
func (r *rig) fresh(i int) *Node {
	o := r.nodes[i]
	n := &Node{Paths: o.Paths, Log: o.Log, Out: o.Out, Snapshot: o.Snapshot, HoldTimeout: o.HoldTimeout,
		ReadyTimeout: o.ReadyTimeout, APIServersWait: o.APIServersWait, Units: o.Units, APIServers: o.APIServers, NoKubeadmConfig: o.NoKubeadmConfig,
		BinaryGiven: o.BinaryGiven, LastPause: o.LastPause}
	r.nodes[i] = n
	return n
}

// runWith runs step on a fresh node i with f injected. killed reports that
// the run died at f.kill; otherwise err is what the run returned and out
// what it printed.
func (r *rig) runWith(i int, step string, f fault) (killed bool, out string, err error) {
	r.t.Helper()
	n := r.fresh(i)
	base := n.Out
	var buf bytes.Buffer
	var mu sync.Mutex
	n.Out = io.MultiWriter(base, writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(b)
	}))
	if f != (fault{}) {
		f.op = step
		n.Faults = f
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exited := make(chan struct{})
	returned := false
	t0 := time.Now()
	go func() {
		defer close(exited)
		err = n.Run(ctx, step, false)
		returned = true
	}()
	<-exited
	n.Faults, n.Out = nil, base
	mu.Lock()
	out = buf.String()
	mu.Unlock()
	r.t.Logf("%s on node%d with %+v: killed %v, err %v (%v)", step, i+1, f, !returned, err, time.Since(t0).Round(time.Millisecond))
	return !returned, out, err
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(b []byte) (int, error) { return w(b) }

// gauntlet runs node step on node i to done through a kill at the begin of
// every sub-step of its plan and a failure after the Do of every sub-step
// but the commit step, each followed by what the operator does next, a
// rerun:
//   - a sub-step before the commit step (any, in a plan without one) is
//     killed at its begin; the rerun puts the interrupted run back, starts
//     afresh, fails at that sub-step and is put back too; check then sees
//     the node as before the step. A plan without a commit step is then
//     done by one clean run;
//   - the commit step is killed at its begin; from there every rerun
//     finishes the run from the commit step (its Do is idempotent): each
//     later sub-step in turn is killed at its begin in one rerun and fails
//     in the next ("committed and serving; rerun"), and a last rerun
//     finishes the step.
//
// The commit step's own failure is not injected: its Do is one transition
// of the store, which happens whole or not at all (a refused one changed
// nothing; a lost answer is retried and found done), so a failure after a
// successful one is not a state the store can be in.
func (r *rig) gauntlet(i int, step string, check func()) {
	r.t.Helper()
	n := r.nodes[i]
	n.defaults()
	d, err := n.def(step)
	if err != nil {
		r.t.Fatal(err)
	}
	subs := d.plan().Steps
	for k, s := range subs {
		if s.Commit {
			r.finishFrom(i, step, subs[k:])
			return
		}
		if killed, out, err := r.runWith(i, step, fault{kill: s.Name}); !killed {
			r.t.Fatalf("%s on node%d was not killed at %s: %v\n%s", step, i+1, s.Name, err, out)
		}
		_, out, err := r.runWith(i, step, fault{fail: s.Name})
		if err == nil || !strings.Contains(out, "the interrupted "+step+" was rolled back") ||
			!strings.Contains(err.Error(), `step "`+s.Name+`" failed`) || !strings.Contains(err.Error(), "every step was put back") {
			r.t.Fatalf("%s on node%d, killed at %s: the rerun, failing at %s, did not put back both runs: %v\n%s", step, i+1, s.Name, s.Name, err, out)
		}
		if check != nil {
			check()
		}
	}
	if _, out, err := r.runWith(i, step, fault{}); err != nil {
		r.t.Fatalf("%s on node%d after its faults: %v\n%s", step, i+1, err, out)
	}
}

// finishFrom is gauntlet from the commit step subs[0] on.
func (r *rig) finishFrom(i int, step string, subs []install.Step) {
	r.t.Helper()
	if killed, out, err := r.runWith(i, step, fault{kill: subs[0].Name}); !killed {
		r.t.Fatalf("%s on node%d was not killed at its commit step %s: %v\n%s", step, i+1, subs[0].Name, err, out)
	}
	for _, s := range subs[1:] {
		if killed, out, err := r.runWith(i, step, fault{kill: s.Name}); !killed {
			r.t.Fatalf("%s on node%d: the rerun finishing it was not killed at %s: %v\n%s", step, i+1, s.Name, err, out)
		}
		_, out, err := r.runWith(i, step, fault{fail: s.Name})
		if err == nil || !strings.Contains(err.Error(), `step "`+s.Name+`" failed`) || !strings.Contains(err.Error(), "committed and serving; rerun") {
			r.t.Fatalf("%s on node%d: the rerun failing at %s after the commit step: %v, want it to say to rerun\n%s", step, i+1, s.Name, err, out)
		}
	}
	_, out, err := r.runWith(i, step, fault{})
	if err != nil || !strings.Contains(out, "the interrupted "+step+" was finished") {
		r.t.Fatalf("%s on node%d: the last rerun did not finish it: %v\n%s", step, i+1, err, out)
	}
}
