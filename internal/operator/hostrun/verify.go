package hostrun

import (
	"bufio"
	"context"
	"os"
	"strings"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// verify asks the host command whether the state a finished journal records
// still stands (`install store --verify`: nothing moved the API server away
// behind QuantyKube's back). It returns "" when it does, else the command's
// one-line reason. Only the store's install has a recorded state to verify.
func (r *Runner) verify(ctx context.Context) string {
	if r.Subject != v1.SubjectStore || r.Op != v1.OperationInstall {
		return ""
	}
	bin, err := r.installSelf()
	if err != nil {
		return err.Error()
	}
	out, err := r.HostCommand(ctx, bin, string(v1.OperationInstall), string(v1.SubjectStore), "--verify")
	if err != nil {
		return lastLine(string(out), err.Error())
	}
	return ""
}

// preflight runs `install SUBJECT --preflight` on the host: the install's
// checks that hold before the node is cordoned and drained.
func (r *Runner) preflight(ctx context.Context) (Result, error) {
	res := Result{Subject: r.Subject, Op: r.Op}
	bin, err := r.installSelf()
	if err != nil {
		return res, err
	}
	out, err := r.HostCommand(ctx, bin, string(v1.OperationInstall), string(r.Subject), "--binary="+bin, "--preflight")
	if err != nil {
		res.State, res.Detail = StateRefused, lastLine(string(out), err.Error())
		return res, nil
	}
	res.State, res.Detail = StateDone, lastLine(string(out), "")
	return res, nil
}

// lastOutputLine is the last non-empty line of the run's output file.
func (r *Runner) lastOutputLine() string {
	b, err := os.ReadFile(r.hostPath(r.Output()))
	if err != nil {
		return "the host command exited before it began (no output: " + err.Error() + ")"
	}
	return lastLine(string(b), "the host command exited before it began, without a word")
}

// lastLine is the last non-empty line of out, or fallback.
func lastLine(out, fallback string) string {
	last := fallback
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			last = l
		}
	}
	return last
}
