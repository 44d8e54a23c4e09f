package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/quantyroot/quantykube/internal/store/snapshot"
)

func newStoreRestoreCommand() *cobra.Command {
	var dataDir, logLevel string
	cmd := &cobra.Command{
		Use:   "restore FILE --data-dir DIR",
		Short: "Make a store data dir from an etcd snapshot file (etcd's or the store's), revisions kept",
		Long: `quantykube store restore reads an etcd snapshot file — made by ` + "`etcdctl snapshot save`" + ` against
etcd or against quantykube store, or an etcd data dir's member/snap/db — verifies its hash, and makes
a new store data dir holding every key with its create/mod revision, version and lease, the
history the file holds, its leases, and its current and compacted revision. DIR must be absent or
empty; it is built beside DIR and renamed into place when complete. Start the store on it with
` + "`quantykube store --data-dir DIR`" + `.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("store restore takes one argument, the snapshot file; run: quantykube store restore FILE --data-dir DIR")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			st, err := snapshot.Restore(cmd.Context(), args[0], dataDir, log)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s into %s: revision %d, compacted %d, %d keys, %d changes, %d leases in %v\n",
				args[0], dataDir, st.Rev, st.Compacted, st.Keys, st.Changes, st.Leases, st.Duration.Round(time.Millisecond))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", "", "the store data dir to create (absent or empty)")
	f.StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error")
	return cmd
}
