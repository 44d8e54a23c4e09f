package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/internal/operator/hostrun"
)

// terminationLog is where kubelet reads a container's termination message.
const terminationLog = "/dev/termination-log"

// detachFollow is how long a --detach host pod follows its unit: long
// enough to see it started (or its timer set), short of the runtime swap
// that would kill the pod anyway.
const detachFollow = 5 * time.Second

// newHostCommand is `quantykube operator host OP SUBJECT`: what the
// operator's host pods run (hostPID, privileged). See package hostrun.
func newHostCommand() *cobra.Command {
	var since string
	var check, detach, preflight bool
	var root, ha string
	cmd := &cobra.Command{
		Use:    "host install|undo store|runtime",
		Short:  "Inside an operator host pod: run or follow an install/undo on the host, through its journal",
		Args:   cobra.ExactArgs(2),
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			logger, err := newLogger("info")
			if err != nil {
				return err
			}
			r := &hostrun.Runner{Target: hostrun.Target{Op: v1.Operation(args[0]), Subject: v1.Subject(args[1]), HA: ha}, Root: root, CheckOnly: check, PreflightOnly: preflight, Log: logger}
			if err := r.Validate(); err != nil {
				return fmt.Errorf("%w; usage: quantykube operator host install|undo store|runtime", err)
			}
			if since != "" {
				t, err := time.Parse(time.RFC3339, since)
				if err != nil {
					return fmt.Errorf("--since %q is not an RFC 3339 time (2026-11-30T12:00:00Z)", since)
				}
				r.Since = t
			}
			ctx := cmd.Context()
			if detach {
				// Follow only until the unit has started; the runtime swap
				// would kill this pod anyway.
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, detachFollow)
				defer cancel()
			}
			res, err := r.Run(ctx)
			if err != nil {
				// Not a Result: the operator shows this text as the reason.
				writeTermination(logger, err.Error())
				return err
			}
			writeTermination(logger, res.String())
			fmt.Fprintln(cmd.OutOrStdout(), res.String())
			if res.State == hostrun.StateRolledBack {
				return fmt.Errorf("%s %s rolled back: %s", res.Op, res.Subject, res.Detail)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&since, "since", "", "runs started before this time belong to earlier attempts (RFC 3339)")
	f.BoolVar(&check, "check", false, "only report the journal's state; start nothing")
	f.BoolVar(&preflight, "preflight", false, "only run the install's checks that need no drained node; start nothing")
	f.BoolVar(&detach, "detach", false, "exit once the unit runs instead of following it to its end")
	f.StringVar(&ha, "ha", "", "store only: the HA move's node step to run (quantykube install|undo store --ha STEP)")
	f.StringVar(&root, "host-root", hostrun.HostRoot, "the host's root as seen from here")
	return cmd
}

// writeTermination writes the pod's termination message, which the operator
// reads as the host pod's result. If it cannot be written the operator sees
// a pod that finished without a result and starts the next attempt, which
// follows the journal; the log says why.
func writeTermination(logger *slog.Logger, msg string) {
	if err := os.WriteFile(terminationLog, []byte(msg), 0o644); err != nil {
		logger.Error("write the termination message; the operator will see no result", "path", terminationLog, "err", err, "message", msg)
	}
}
