package storemove

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// kubeadmClusterConfig is a ClusterConfiguration as kubeadm v1.36 uploads it.
const kubeadmClusterConfig = `apiServer:
  certSANs:
  - 172.30.233.2
  - 127.0.0.1
  extraArgs:
  - name: shutdown-watch-termination-grace-period
    value: 2s
apiVersion: kubeadm.k8s.io/v1beta4
caCertificateValidityPeriod: 87600h0m0s
certificateValidityPeriod: 8760h0m0s
certificatesDir: /etc/kubernetes/pki
clusterName: qk
controlPlaneEndpoint: 172.30.233.2:6443
controllerManager: {}
dns: {}
encryptionAlgorithm: RSA-2048
etcd:
  local:
    dataDir: /var/lib/etcd
    imageTag: 3.6.16
imageRepository: registry.k8s.io
kind: ClusterConfiguration
kubernetesVersion: v1.36.3
networking:
  dnsDomain: cluster.local
  podSubnet: 10.244.0.0/16
  serviceSubnet: 10.96.0.0/16
proxy: {}
scheduler: {}
`

func TestWithExternalEtcdChangesOnlyEtcd(t *testing.T) {
	p := DefaultPaths()
	out, err := withExternalEtcd([]byte(kubeadmClusterConfig), p.externalStore())
	if err != nil {
		t.Fatal(err)
	}
	if got := etcdEndpointsOf(out); !slices.Equal(got, []string{StoreURL}) {
		t.Fatalf("endpoints %v, want %s\n%s", got, StoreURL, out)
	}
	for _, want := range []string{"caFile: /etc/kubernetes/pki/etcd/ca.crt", "certFile: /etc/kubernetes/pki/apiserver-etcd-client.crt",
		"keyFile: /etc/kubernetes/pki/apiserver-etcd-client.key", "kubernetesVersion: v1.36.3", "podSubnet: 10.244.0.0/16",
		"value: 2s", "controllerManager: {}"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "local:") || strings.Contains(string(out), "/var/lib/etcd") {
		t.Errorf("etcd.local still there:\n%s", out)
	}
	// Everything outside the etcd section is kept line for line.
	strip := func(s string) string {
		var keep []string
		skip := false
		for _, l := range strings.Split(s, "\n") {
			if strings.HasPrefix(l, "etcd:") {
				skip = true
				continue
			}
			if skip && strings.HasPrefix(l, " ") {
				continue
			}
			skip = false
			keep = append(keep, l)
		}
		return strings.Join(keep, "\n")
	}
	if strip(string(out)) != strip(kubeadmClusterConfig) {
		t.Errorf("fields outside etcd changed:\n%s\nwant\n%s", strip(string(out)), strip(kubeadmClusterConfig))
	}
}

func TestWithEtcdSectionOfKeepsAnUpgrade(t *testing.T) {
	p := DefaultPaths()
	ours, err := withExternalEtcd([]byte(kubeadmClusterConfig), p.externalStore())
	if err != nil {
		t.Fatal(err)
	}
	upgraded := bytes.Replace(ours, []byte("v1.36.3"), []byte("v1.36.4"), 1)
	back, err := withEtcdSectionOf(upgraded, []byte(kubeadmClusterConfig))
	if err != nil {
		t.Fatal(err)
	}
	if etcdEndpointsOf(back) != nil {
		t.Fatalf("still external:\n%s", back)
	}
	want := strings.Replace(kubeadmClusterConfig, "v1.36.3", "v1.36.4", 1)
	if string(back) != want {
		t.Fatalf("got\n%s\nwant\n%s", back, want)
	}
}

func TestClusterConfigRefusesGarbage(t *testing.T) {
	for _, in := range []string{"", "- a list\n", "a: [unclosed\n"} {
		if _, err := withExternalEtcd([]byte(in), DefaultPaths().externalStore()); err == nil {
			t.Errorf("%q: accepted", in)
		}
	}
}
