package hamove

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quantyroot/quantykube/internal/install"
	"github.com/quantyroot/quantykube/internal/install/systemd"
	"github.com/quantyroot/quantykube/internal/store/mirror/api"
	"github.com/quantyroot/quantykube/internal/store/mirror/client"
)

// Node runs the HA move's steps on this control-plane node.
type Node struct {
	Paths Paths
	Log   *slog.Logger
	Out   io.Writer
	// Snapshot is restore-etcd's input: the file replay-to saved (copied to
	// this node by the coordinator).
	Snapshot string
	// HoldTimeout bounds the write pause of cutover and cutback.
	HoldTimeout time.Duration
	// ReadyTimeout bounds the wait for the local API server after a switch.
	ReadyTimeout time.Duration
	// APIServersWait bounds the cut-over preflight's wait for the API
	// server pods to show every API server on the store (default
	// apiServersWait).
	APIServersWait time.Duration
	// Units runs the store member (systemd in production).
	Units Units
	// APIServers maps each control-plane node to its API server's
	// --etcd-servers (default: the API's kube-apiserver mirror pods).
	APIServers func(ctx context.Context) (map[string]string, error)
	// NoKubeadmConfig leaves kubeadm's ClusterConfiguration alone (tests
	// without an API server).
	NoKubeadmConfig bool
	// BinaryGiven uses the binary at Paths.Binary as it is, instead of
	// installing the running executable there (tests run the steps
	// in-process).
	BinaryGiven bool
	// Faults injects failures for tests (install.FaultsFromEnv).
	Faults install.Faults

	// LastPause is the write pause of the last cutover or cutback run here.
	LastPause *api.Pause

	facts Facts
}

// Units installs and removes the store member's unit.
type Units interface {
	Install(ctx context.Context, u systemd.Unit) error
	Remove(ctx context.Context, name string) error
}

// Systemd is Units through systemctl.
type Systemd struct{}

func (Systemd) Install(ctx context.Context, u systemd.Unit) error { return systemd.Install(ctx, u) }
func (Systemd) Remove(ctx context.Context, name string) error     { return systemd.Remove(ctx, name) }

func (n *Node) defaults() {
	if n.HoldTimeout == 0 {
		n.HoldTimeout = 5 * time.Second
	}
	if n.ReadyTimeout == 0 {
		n.ReadyTimeout = 3 * time.Minute
	}
	if n.APIServersWait == 0 {
		n.APIServersWait = apiServersWait
	}
	if n.APIServers == nil {
		n.APIServers = n.apiserversOn
	}
	if n.Units == nil {
		n.Units = Systemd{}
	}
	if n.Log == nil {
		n.Log = slog.Default()
	}
	if n.Out == nil {
		n.Out = io.Discard
	}
}

// stepDef is a node step: its plan and the check that it may start.
type stepDef struct {
	plan      func() *install.Plan
	preflight func(ctx context.Context) error
}

func (n *Node) def(step string) (stepDef, error) {
	switch step {
	case StepFirst:
		return stepDef{n.firstPlan, n.firstPreflight}, nil
	case StepJoin:
		return stepDef{n.joinPlan, n.joinPreflight}, nil
	case StepSwitch:
		return stepDef{n.switchPlan, n.switchPreflight}, nil
	case StepCutover:
		return stepDef{n.cutoverPlan, n.cutoverPreflight}, nil
	case StepStopEtcd:
		return stepDef{n.stopEtcdPlan, n.stopEtcdPreflight}, nil
	case StepReplayTo:
		return stepDef{n.replayToPlan, n.replayToPreflight}, nil
	case StepRestoreEtcd:
		return stepDef{n.restoreEtcdPlan, n.restoreEtcdPreflight}, nil
	case StepCutback:
		return stepDef{n.cutbackPlan, n.cutbackPreflight}, nil
	case StepSwitchBack:
		return stepDef{n.switchBackPlan, n.switchBackPreflight}, nil
	case StepLeave:
		return stepDef{n.leavePlan, n.leavePreflight}, nil
	}
	return stepDef{}, fmt.Errorf("unknown step %q; the steps are %v (install) and %v (undo)", step, InstallSteps, UndoSteps)
}

// Run runs step on this node: it finishes or puts back an interrupted run
// of the step first, does nothing if the step is done, refuses (one line,
// nothing written) when the cluster is not where the step belongs, and
// otherwise runs the step's plan. With dryRun it prints the preflight
// verdict and the plan with each step's impact, changing nothing; a failed
// preflight is its error.
func (n *Node) Run(ctx context.Context, step string, dryRun bool) error {
	n.defaults()
	d, err := n.def(step)
	if err != nil {
		return err
	}
	if n.facts, err = n.Paths.loadFacts(); err != nil {
		return err
	}
	j, _ := install.OpenJournal(n.journal(step))
	st, err := j.State()
	if err != nil {
		return err
	}
	stale, err := n.staleDone(step)
	if err != nil {
		return err
	}
	done := st.Finished == install.EventDone && !stale
	if dryRun {
		var refused error
		switch {
		case done:
			fmt.Fprintf(n.Out, "%s is done on %s; nothing to do\n", step, n.facts.Name)
		default:
			if refused = d.preflight(ctx); refused == nil {
				fmt.Fprintln(n.Out, "preflight: ok")
			}
		}
		(&install.Runner{Log: n.Log}).DryRun(n.Out, d.plan())
		if refused != nil {
			return fmt.Errorf("preflight failed: %w", refused)
		}
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s must run as root on the control-plane node (try sudo)", step)
	}
	if done {
		fmt.Fprintf(n.Out, "%s is done on %s; nothing to do\n", step, n.facts.Name)
		return nil
	}
	interrupted := st.Op != "" && st.Finished == ""
	if install.Busy(n.Paths.lockFile()) {
		return fmt.Errorf("%w; wait for it to finish", install.ErrBusy)
	}
	if !interrupted {
		if err := d.preflight(ctx); err != nil {
			return err
		}
	}
	release, err := install.Lock(n.Paths.lockFile())
	if err != nil {
		return err
	}
	defer release()
	if !interrupted && (step == StepFirst || step == StepJoin) {
		if err := n.newCycle(); err != nil {
			return err
		}
	}
	r := &install.Runner{Journal: j, Log: n.Log, Out: n.Out, Faults: n.Faults}
	if interrupted {
		how, err := r.Recover(ctx, d.plan())
		if err != nil {
			return err
		}
		fmt.Fprintf(n.Out, "the interrupted %s was %s\n", step, how)
		if how == "finished" {
			return nil
		}
		if err := d.preflight(ctx); err != nil {
			return err
		}
	}
	return r.Run(ctx, d.plan())
}

// Done reports whether step's journal on this node says it is done.
func (n *Node) Done(step string) (bool, error) {
	j, _ := install.OpenJournal(n.journal(step))
	st, err := j.State()
	return st.Finished == install.EventDone, err
}

func (n *Node) journal(step string) string { return n.Paths.stepDir(step) + "/journal.jsonl" }

// dial opens an etcd client to endpoints with kube-apiserver's etcd client
// certificate (etcd and the store both accept it).
func (n *Node) dial(endpoints ...string) (*clientv3.Client, error) {
	c, err := n.Paths.Dial(endpoints[0])
	if err != nil {
		return nil, err
	}
	c.SetEndpoints(endpoints...)
	return c, nil
}

// admin opens the mirror admin client of the local member.
func (n *Node) admin() (*client.Client, error) {
	return client.Dial(n.Paths.LocalURL(), client.Files{CAFile: n.Paths.EtcdCA(), CertFile: n.Paths.ClientCert(), KeyFile: n.Paths.ClientKey()})
}

// errNotYet wraps a refusal whose fix is another step first.
var errNotYet = errors.New("not yet")

// A node's step journals belong to one move of it (a cycle): from its
// first or join to its leave. A fresh run of first or join begins a new
// cycle: every step journal of the node is moved under
// <state>/cycles/<time>/ (kept, never deleted), so "done" always means done
// in this move.
func (n *Node) newCycle() error {
	var old []string
	for _, s := range append(append([]string{}, InstallSteps...), UndoSteps...) {
		if _, err := os.Stat(n.journal(s)); err == nil {
			old = append(old, s)
		}
	}
	if len(old) == 0 {
		return nil
	}
	dir := filepath.Join(n.Paths.StateDir, "cycles", time.Now().UTC().Format("20060102T150405.000Z"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, s := range old {
		if err := os.Rename(n.Paths.stepDir(s), filepath.Join(dir, s)); err != nil {
			return fmt.Errorf("keep the previous move's %s journal: %w", s, err)
		}
	}
	fmt.Fprintf(n.Out, "a new move of this node: the previous one's journals are kept in %s\n", dir)
	return nil
}

// staleDone reports whether step was done in an earlier move of this
// node: its leave finished after it (for leave: a first or join after it).
func (n *Node) staleDone(step string) (bool, error) {
	mine, err := n.doneAt(step)
	if err != nil || mine.IsZero() {
		return false, err
	}
	later := []string{StepLeave}
	if step == StepLeave {
		later = []string{StepFirst, StepJoin}
	}
	for _, s := range later {
		at, err := n.doneAt(s)
		if err != nil {
			return false, err
		}
		if at.After(mine) {
			return true, nil
		}
	}
	return false, nil
}

// doneAt is when step's journal last recorded done (zero if never).
func (n *Node) doneAt(step string) (time.Time, error) {
	j, _ := install.OpenJournal(n.journal(step))
	recs, err := j.Records()
	if err != nil {
		return time.Time{}, err
	}
	var at time.Time
	for _, r := range recs {
		if r.Event == install.EventDone {
			at = r.Time
		}
	}
	return at, nil
}
