package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/quantyroot/quantykube/internal/version"
)

// newVersionCommand prints the release version and the commit of this build
// (internal/version), or with --image the image reference it is tagged with.
func newVersionCommand() *cobra.Command {
	var image bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print QuantyKube's version and commit (or with --image its image reference)",
		Long: `Print QuantyKube's version and the commit this binary was built from:
"quantykube v0.1.0, commit 0123456789ab" (scripts/release.sh stamps both).

With --image, the reference of this build's image: ghcr.io/quantyroot/quantykube:<version>-<commit>.
The digest that pins it cannot be in the binary (the digest covers the binary): it is in the
release's quantykube.yaml, and the operator records the reference it runs in the Installation's
status.operator.image.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if image {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), version.ImageRef())
				return err
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "quantykube "+version.String())
			return err
		},
	}
	cmd.Flags().BoolVar(&image, "image", false, "print the image reference of this build (version and commit) instead")
	return cmd
}
