//go:build tools

// Package tools pins etcd's benchmark tool (go.etcd.io/etcd/v3/tools/benchmark),
// which scripts/deps.sh builds from this wrapper module; it is never compiled.
// A wrapper is needed because the root module's replace directives make
// `go install go.etcd.io/etcd/v3/tools/benchmark@v3.6.8` fail.
package tools

import _ "go.etcd.io/etcd/v3/tools/benchmark"
