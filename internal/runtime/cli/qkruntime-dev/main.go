package main

import (
	"os"

	"github.com/quantyroot/quantykube/internal/runtime/cli"
	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{Use: "quantykube", SilenceUsage: true}
	root.AddCommand(cli.NewCommand())
	if err := root.Execute(); err != nil {
		os.Exit(1)
	}
}
