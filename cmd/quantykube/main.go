// Command quantykube is QuantyKube's one binary: the store, the runtime, the
// host install/undo commands and the operator are its subcommands.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	operatorcli "github.com/quantyroot/quantykube/internal/operator/cli"
	runtimecli "github.com/quantyroot/quantykube/internal/runtime/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := &cobra.Command{
		Use:           "quantykube",
		Short:         "Change what a running Kubernetes cluster stands on: its datastore and its container runtime",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newStoreCommand(), newInstallCommand(), newUndoCommand(), runtimecli.NewCommand(), operatorcli.NewCommand(), newVersionCommand())
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "quantykube:", err)
		os.Exit(1)
	}
}

// newLogger returns the process logger: JSON lines on stderr.
func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q is not a level; use debug, info, warn or error", level)
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}
