package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/quantyroot/quantykube/internal/version"
)

// newVersionCommand prints the release version (internal/version), the one
// the image is tagged with.
func newVersionCommand() *cobra.Command {
	var image bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print QuantyKube's version (the tag of its image)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if image {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), version.ImageRef())
				return err
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version.Version)
			return err
		},
	}
	cmd.Flags().BoolVar(&image, "image", false, "print the image reference of this version instead")
	return cmd
}
