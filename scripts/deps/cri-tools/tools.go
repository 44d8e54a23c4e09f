//go:build tools

// Package tools pins crictl and critest (a Go test binary), which
// scripts/deps.sh builds from this wrapper module; it is never compiled.
package tools

import (
	_ "sigs.k8s.io/cri-tools/cmd/crictl"
	_ "sigs.k8s.io/cri-tools/cmd/critest"
)
