package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/quantyroot/quantykube/internal/store"
	"github.com/quantyroot/quantykube/internal/store/mirror/api"
	"github.com/quantyroot/quantykube/internal/store/mirror/client"
)

// mirrorConn are the flags that reach a running member (etcdctl's names).
type mirrorConn struct {
	endpoints      string
	files          client.Files
	commandTimeout time.Duration
	json           bool
}

func (c *mirrorConn) flags(f *pflag.FlagSet) {
	f.StringVar(&c.endpoints, "endpoints", store.DefaultClientURL, "comma-separated client URLs of store members (any one serves the call; status asks each)")
	f.StringVar(&c.files.CAFile, "cacert", "", "CA that signs the store's server certificate")
	f.StringVar(&c.files.CertFile, "cert", "", "client certificate the store accepts")
	f.StringVar(&c.files.KeyFile, "key", "", "key of the client certificate")
	f.DurationVar(&c.commandTimeout, "command-timeout", 60*time.Second, "how long the whole call may take")
	f.BoolVar(&c.json, "json", false, "print the answer as JSON")
}

// each calls fn on the members in turn until one answers; refusals (the
// member's one line) are not retried on the next member.
func (c *mirrorConn) each(ctx context.Context, fn func(context.Context, *client.Client) error) error {
	eps := store.SplitURLs(c.endpoints)
	if len(eps) == 0 {
		return errors.New("--endpoints is empty; pass a store member's client URL, such as " + store.DefaultClientURL)
	}
	ctx, cancel := context.WithTimeout(ctx, c.commandTimeout)
	defer cancel()
	var last error
	for _, ep := range eps {
		cl, err := client.Dial(ep, c.files)
		if err != nil {
			return err
		}
		err = fn(ctx, cl)
		cl.Close()
		if err == nil || !client.Unreachable(err) {
			return err
		}
		last = fmt.Errorf("%s: %w", ep, err)
	}
	return last
}

func (c *mirrorConn) print(w io.Writer, v any, text func() string) error {
	if c.json {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	}
	_, err := fmt.Fprintln(w, text())
	return err
}

// peerFlags binds --<role>-endpoints, --<role>-cacert, --<role>-cert, --<role>-key.
func peerFlags(f *pflag.FlagSet, role string, p *api.Peer, eps *string) {
	f.StringVar(eps, role+"-endpoints", "", "comma-separated client URLs of the "+role+" etcd cluster")
	f.StringVar(&p.CAFile, role+"-cacert", "", "CA that signs the "+role+"'s server certificates (same path on every member)")
	f.StringVar(&p.CertFile, role+"-cert", "", "client certificate the "+role+" accepts (same path on every member)")
	f.StringVar(&p.KeyFile, role+"-key", "", "key of that client certificate")
}

func newStoreMirrorCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mirror",
		Short: "Mirror an etcd cluster, take over from it, and replay back onto it (docs/adr/202)",
		Long: `quantykube store mirror moves a replicated store's role between an etcd cluster and the store with the
API answering throughout: start (the store, restored from an etcd snapshot, mirrors etcd: reads local,
writes forwarded), cutover (the store becomes the owner; writes pause once), replay-to (the owner replays
its changes onto an etcd cluster restored from a store snapshot), cutback (the store becomes a mirror of
that etcd again), status. Every call is idempotent; each refusal is one line with the fix.`,
	}
	cmd.AddCommand(newMirrorStartCommand(), newMirrorStatusCommand(), newMirrorCutoverCommand(),
		newMirrorReplayToCommand(), newMirrorCutbackCommand())
	return cmd
}
