package testserver

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

	"go.etcd.io/etcd/server/v3/embed"
)

// NewTestConfig returns the configuration the suites may adjust before
// RunEtcd. Like the upstream package it starts from embed.NewConfig() with
// UnsafeNoFsync set, free loopback ports for client and peer URLs and a fresh
// t.TempDir() data directory. Only the fields RunEtcd translates into server
// flags have an effect (see serverArgs).
func NewTestConfig(t testing.TB) *embed.Config {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.UnsafeNoFsync = true
	if err := assignFreePorts(cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Dir = t.TempDir()
	if err := os.Chmod(cfg.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// assignFreePorts points the client and peer URLs of cfg at ports that were
// free a moment ago on 127.0.0.1 (startServer retries if one is taken since).
func assignFreePorts(cfg *embed.Config) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	clientURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
	peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	return nil
}

// memberConfigs returns the configurations of the n members RunEtcd starts
// for cfg. With n == 1 that is cfg itself. Otherwise cfg becomes member 0 and
// n-1 copies follow, each with its own name, free ports and t.TempDir() data
// directory, and the same fields args translates (UnsafeNoFsync,
// WatchProgressNotifyInterval, QuotaBackendBytes); every InitialCluster names
// all n members.
func memberConfigs(t testing.TB, cfg *embed.Config, n int) ([]*embed.Config, error) {
	if n == 1 {
		return []*embed.Config{cfg}, nil
	}
	cfgs := []*embed.Config{cfg}
	for i := 1; i < n; i++ {
		m := embed.NewConfig()
		m.UnsafeNoFsync = cfg.UnsafeNoFsync
		m.WatchProgressNotifyInterval = cfg.WatchProgressNotifyInterval
		m.QuotaBackendBytes = cfg.QuotaBackendBytes
		m.Dir = t.TempDir()
		if err := os.Chmod(m.Dir, 0o700); err != nil {
			return nil, err
		}
		cfgs = append(cfgs, m)
	}
	for i, m := range cfgs {
		m.Name = fmt.Sprintf("member-%d", i)
	}
	return cfgs, reassignPorts(cfgs)
}

// reassignPorts gives every member fresh free ports and an InitialCluster
// naming all of them (a single member's is its own, as embed makes it).
func reassignPorts(cfgs []*embed.Config) error {
	for _, m := range cfgs {
		if err := assignFreePorts(m); err != nil {
			return err
		}
	}
	if len(cfgs) == 1 {
		return nil
	}
	var initial []string
	for _, m := range cfgs {
		initial = append(initial, m.Name+"="+m.AdvertisePeerUrls[0].String())
	}
	for _, m := range cfgs {
		m.InitialCluster = strings.Join(initial, ",")
	}
	return nil
}
