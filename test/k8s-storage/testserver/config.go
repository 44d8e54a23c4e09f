package testserver

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
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

// freePorts returns count distinct TCP ports that were bindable on 127.0.0.1.
func freePorts(count int) ([]int, error) {
	var ports []int
	for range count {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port on 127.0.0.1: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
