package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quantyroot/quantykube/internal/store"
	"github.com/quantyroot/quantykube/internal/store/mirror"
	"github.com/quantyroot/quantykube/internal/store/mirror/api"
	"github.com/quantyroot/quantykube/internal/store/mirror/client"
)

func newMirrorStartCommand() *cobra.Command {
	var (
		conn         mirrorConn
		req          api.StartRequest
		eps, dataDir string
		logLevel     string
	)
	cmd := &cobra.Command{
		Use:   "start --source-endpoints URLS [--data-dir DIR | --endpoints URLS]",
		Short: "Make a store restored from an etcd snapshot a mirror of that etcd cluster",
		Long: `Checks that the store holds exactly the source's state at its revision (same keys, values, revisions,
versions, leases), then records the mirror mode. With --data-dir it works on a stopped data dir just made
by 'quantykube store restore' (before the store first runs, so none of the snapshot's leases expires);
with --endpoints, on a running member.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req.Source.Endpoints = store.SplitURLs(eps)
			var st *api.Status
			if dataDir != "" {
				log, err := newLogger(logLevel)
				if err != nil {
					return err
				}
				ctx, cancel := context.WithTimeout(cmd.Context(), conn.commandTimeout)
				defer cancel()
				if st, err = mirror.StartOffline(ctx, dataDir, &req, log); err != nil {
					return err
				}
			} else if err := conn.each(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
				st, err = c.Start(ctx, req)
				return err
			}); err != nil {
				return err
			}
			return conn.print(cmd.OutOrStdout(), st, func() string { return statusText(st) })
		},
	}
	conn.flags(cmd.Flags())
	peerFlags(cmd.Flags(), "source", &req.Source, &eps)
	cmd.Flags().Int64Var(&req.Revision, "revision", 0, "the revision of the snapshot the store was restored from (refused if the store is elsewhere)")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "a stopped store data dir made by 'quantykube store restore' (instead of --endpoints)")
	cmd.Flags().StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error (with --data-dir)")
	return cmd
}

func newMirrorStatusCommand() *cobra.Command {
	var conn mirrorConn
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show each member's mode, peer, revisions, lag, leader and last pause",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var all []*api.Status
			for _, ep := range store.SplitURLs(conn.endpoints) {
				one := conn
				one.endpoints = ep
				var st *api.Status
				if err := one.each(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
					st, err = c.Status(ctx)
					return err
				}); err != nil {
					return fmt.Errorf("%s: %w", ep, err)
				}
				all = append(all, st)
			}
			return conn.print(cmd.OutOrStdout(), all, func() string {
				var b strings.Builder
				for i, st := range all {
					if i > 0 {
						b.WriteString("\n")
					}
					b.WriteString(statusText(st))
				}
				return b.String()
			})
		},
	}
	conn.flags(cmd.Flags())
	return cmd
}

func transitionCommand(use, short, long string, call func(context.Context, *client.Client, api.TransitionRequest) (*api.TransitionResult, error)) *cobra.Command {
	var (
		conn mirrorConn
		req  api.TransitionRequest
	)
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res *api.TransitionResult
			if err := conn.each(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
				res, err = call(ctx, c, req)
				return err
			}); err != nil {
				return err
			}
			return conn.print(cmd.OutOrStdout(), res, func() string { return transitionText(res) })
		},
	}
	conn.flags(cmd.Flags())
	cmd.Flags().DurationVar(&req.Timeout, "hold-timeout", 5*time.Second, "the longest writes may be held; past it the transition is abandoned and nothing changes")
	return cmd
}

func newMirrorCutoverCommand() *cobra.Command {
	return transitionCommand("cutover", "Make the mirror the owner (writes held once, briefly)",
		`Holds writes on every member, lets the ones in flight finish, reads the source's revision, replays up
to it with the source's leases, and makes the store the owner there (leases keep their ids and get their
full TTL again); held writes then run on the store. Only when no API server uses the source any more.`,
		func(ctx context.Context, c *client.Client, r api.TransitionRequest) (*api.TransitionResult, error) {
			return c.Cutover(ctx, r)
		})
}

func newMirrorCutbackCommand() *cobra.Command {
	return transitionCommand("cutback", "Make an owner that replays onto etcd a mirror of it (writes held once, briefly)",
		`Holds writes on every member, drains the replay into the target to the store's revision, makes the
store a mirror of the target there, and forwards the held writes to it.`,
		func(ctx context.Context, c *client.Client, r api.TransitionRequest) (*api.TransitionResult, error) {
			return c.Cutback(ctx, r)
		})
}

func newMirrorReplayToCommand() *cobra.Command {
	var (
		conn mirrorConn
		req  api.ReplayToRequest
		eps  string
	)
	cmd := &cobra.Command{
		Use:   "replay-to --target-endpoints URLS --revision REV | --stop",
		Short: "Replay the owner's changes after a snapshot's revision onto an etcd cluster restored from it",
		Long: `Run it right after taking the store snapshot the target's members are restored from (before the
target starts): compaction waits from then on, and the replay reaches the target as soon as it answers,
keeping its leases alive. --stop ends replaying (back to owner).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req.Target.Endpoints = store.SplitURLs(eps)
			var st *api.Status
			if err := conn.each(cmd.Context(), func(ctx context.Context, c *client.Client) (err error) {
				st, err = c.ReplayTo(ctx, req)
				return err
			}); err != nil {
				return err
			}
			return conn.print(cmd.OutOrStdout(), st, func() string { return statusText(st) })
		},
	}
	conn.flags(cmd.Flags())
	peerFlags(cmd.Flags(), "target", &req.Target, &eps)
	cmd.Flags().Int64Var(&req.Revision, "revision", 0, "the revision of the store snapshot the target was restored from")
	cmd.Flags().BoolVar(&req.Stop, "stop", false, "stop replaying instead")
	return cmd
}

func statusText(st *api.Status) string {
	var b strings.Builder
	fmt.Fprintf(&b, "member %s (leader %s): mode %s", st.Member, st.Leader, st.Mode)
	if st.Peer != nil {
		fmt.Fprintf(&b, " %v", st.Peer.Endpoints)
	}
	fmt.Fprintf(&b, " since %d, applied revision %d", st.Since, st.AppliedRevision)
	if st.PeerRevision != 0 {
		fmt.Fprintf(&b, ", peer revision %d, lag %d", st.PeerRevision, st.Lag)
	}
	for _, s := range []struct{ k, v string }{{"peer error", st.PeerError}, {"failed", st.Failed}, {"last abort", st.LastAbort}} {
		if s.v != "" {
			fmt.Fprintf(&b, "\n  %s: %s", s.k, s.v)
		}
	}
	if st.Hold != nil {
		fmt.Fprintf(&b, "\n  holding writes for a %s since %s", st.Hold.Op, st.Hold.Started.Format(time.RFC3339Nano))
	}
	if st.Replayer != nil {
		fmt.Fprintf(&b, "\n  replayer: running %v, target revision %d", st.Replayer.Running, st.Replayer.TargetRevision)
		if st.Replayer.LastError != "" {
			fmt.Fprintf(&b, ", last error: %s", st.Replayer.LastError)
		}
	}
	if p := st.LastPause; p != nil {
		fmt.Fprintf(&b, "\n  last pause: %s at revision %d held writes for %v", p.Op, p.Revision, p.Duration.Round(time.Millisecond))
	}
	return b.String()
}

func transitionText(r *api.TransitionResult) string {
	s := fmt.Sprintf("mode %s", r.Mode)
	if r.Pause != nil {
		s += fmt.Sprintf(": %s at revision %d held writes for %v", r.Pause.Op, r.Pause.Revision, r.Pause.Duration.Round(time.Millisecond))
	}
	if r.AlreadyDone {
		s += " (done before)"
	}
	return s
}
