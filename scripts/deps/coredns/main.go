// Command coredns is CoreDNS with only the plugins of kubeadm's default
// Corefile (cmd/kubeadm/app/phases/addons/dns/manifests.go: errors, health,
// ready, kubernetes, prometheus, forward, cache, loop, reload, loadbalance).
//
// It is upstream's coredns.go with core/plugin (every plugin) replaced by that
// list: the binary and its cold build stay small, and a Corefile that names
// any other plugin fails at start with "unknown directive". The plugin chain's
// order is upstream's (core/dnsserver's directive list), whatever the order of
// the imports below.
package main

import (
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics" // the Corefile's "prometheus"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"

	"github.com/coredns/coredns/coremain"
)

func main() { coremain.Run() }
