//go:build tools

// Package tools pins etcd, etcdctl and etcdutl, which scripts/deps.sh builds from this
// wrapper module; it is never compiled.
package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/etcdutl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
