package etcdrestore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestRunningEtcdutl: the etcdutl of the etcd process that serves the data
// dir asked for is found through its root file system; another etcd's, or
// another program's, is not.
func TestRunningEtcdutl(t *testing.T) {
	proc := t.TempDir()
	mk := func(pid, cmdline string, withEtcdutl bool) {
		d := filepath.Join(proc, pid)
		if err := os.MkdirAll(filepath.Join(d, "root", filepath.Dir(ImageEtcdutl)), 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "cmdline"), []byte(cmdline), 0o600)
		if withEtcdutl {
			os.WriteFile(filepath.Join(d, "root", ImageEtcdutl), []byte("#!/bin/true\n"), 0o755)
		}
	}
	mk("10", "/usr/bin/etcd-wrapper\x00--data-dir=/var/lib/etcd\x00", true)
	mk("11", "etcd\x00--data-dir=/srv/other\x00", true)
	mk("12", "etcd\x00--advertise-client-urls=https://10.0.0.1:2379\x00--data-dir\x00/var/lib/etcd\x00", true)
	os.MkdirAll(filepath.Join(proc, "self"), 0o700)
	got, err := RunningEtcdutl(proc, "/var/lib/etcd")
	if want := filepath.Join(proc, "12", "root", ImageEtcdutl); err != nil || got != want {
		t.Fatalf("RunningEtcdutl = %q, %v; want %q", got, err, want)
	}
	if _, err := RunningEtcdutl(proc, "/nowhere"); !errors.Is(err, ErrNoEtcdProcess) {
		t.Fatalf("no etcd on /nowhere: err %v, want ErrNoEtcdProcess", err)
	}
	mk("13", "/usr/local/bin/etcd\x00--data-dir=/var/lib/etcd2\x00", false)
	if _, err := RunningEtcdutl(proc, "/var/lib/etcd2"); err == nil || errors.Is(err, ErrNoEtcdProcess) {
		t.Fatalf("etcd from an image without etcdutl: err %v, want one naming it", err)
	}
}

// TestMemberOf reads kubeadm's etcd manifest flags, with etcd's defaults.
func TestMemberOf(t *testing.T) {
	m, err := MemberOf([]byte(`spec:
  containers:
  - command:
    - etcd
    - --advertise-client-urls=https://10.0.0.5:2379
    - --initial-advertise-peer-urls=https://10.0.0.5:2380
    - --name=cp1
`))
	want := Member{Name: "cp1", ClientURL: "https://10.0.0.5:2379", DataDir: "/var/lib/etcd", PeerURL: "https://10.0.0.5:2380", Token: "etcd-cluster"}
	if err != nil || m != want {
		t.Fatalf("MemberOf = %+v, %v; want %+v", m, err, want)
	}
}
