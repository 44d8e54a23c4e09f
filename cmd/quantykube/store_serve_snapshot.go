package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/quantyroot/quantykube/internal/install/hamove"
)

// newStoreServeSnapshotCommand is the server `undo store --ha replay-to`
// starts as a unit on its node: the other control-plane nodes'
// `restore-etcd` fetch the store's snapshot from it (ADR 202).
func newStoreServeSnapshotCommand() *cobra.Command {
	var s hamove.SnapshotServer
	var logLevel string
	cmd := &cobra.Command{
		Use:   "serve-snapshot FILE --listen HOST:PORT --cert-file F --key-file F --trusted-ca-file F",
		Short: "Serve a store snapshot over HTTPS to clients with a certificate of the CA (the HA undo's restore-etcd on the other nodes)",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("store serve-snapshot takes one argument, the snapshot file; run: quantykube store serve-snapshot FILE --listen HOST:PORT --cert-file F --key-file F --trusted-ca-file F")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			if s.Listen == "" || s.CertFile == "" || s.KeyFile == "" || s.CAFile == "" {
				return errors.New("store serve-snapshot needs --listen, --cert-file, --key-file and --trusted-ca-file (etcd's peer certificate, key and CA)")
			}
			s.File, s.Log = args[0], log
			return s.Serve(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&s.Listen, "listen", "", "HOST:PORT to serve on (the node's address)")
	f.StringVar(&s.CertFile, "cert-file", "", "the server's certificate (etcd's peer certificate)")
	f.StringVar(&s.KeyFile, "key-file", "", "its key")
	f.StringVar(&s.CAFile, "trusted-ca-file", "", "the CA a client's certificate must be signed by (etcd's)")
	f.DurationVar(&s.For, "for", hamove.SnapshotServeFor, "stop serving after this long (0: until stopped)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}
