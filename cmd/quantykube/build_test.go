package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// pluginFreeTag is kustomize's build tag that leaves out its Go-plugin
// loader, the one importer of Go's plugin package in this binary's graph
// (kubectl's drain → cli-runtime → kustomize). bench/run.sh builds with it.
const pluginFreeTag = "kustomize_disable_go_plugin_support"

// TestShippedBuildLinksNoGoPlugin: with pluginFreeTag, nothing links Go's
// plugin package. A linked plugin package (with cgo) makes the linker export
// every symbol and keep every method: 34 MB of binary and 9 MiB of an idle
// store's RSS (ADR 001, "Memory").
func TestShippedBuildLinksNoGoPlugin(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", pluginFreeTag, ".").Output()
	if err != nil {
		t.Skipf("go list: %v (needs the go tool)", err)
	}
	if slices.Contains(strings.Fields(string(out)), "plugin") {
		t.Fatalf("the build with -tags %s links Go's plugin package: find its importer with `go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./cmd/quantykube | grep -w plugin` and drop it or its build tag", pluginFreeTag)
	}
}
