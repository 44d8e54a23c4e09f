package etcdrestore

import "testing"

// The etcd minor versions CheckEtcdutl compares: the cluster's from its
// etcd image tag (kubeadm's and the harness's shapes), etcdutl's from its
// `version` output; a manifest without a version tag is not compared.
func TestEtcdMinorVersions(t *testing.T) {
	for _, c := range []struct {
		manifest, want string
		ok             bool
	}{
		{"    image: registry.k8s.io/etcd:3.6.5-0\n", "3.6", true},
		{"  - image: \"registry.k8s.io/etcd:3.5.21-0\"\n", "3.5", true},
		{"    image: registry.k8s.io/etcd:3.6.16\n", "3.6", true},
		{"    image: example.com/etcd@sha256:abc\n", "", false},
		{"    image: localhost:5000/etcd:latest\n", "", false},
	} {
		if got, ok := ImageMinor([]byte(c.manifest)); got != c.want || ok != c.ok {
			t.Errorf("ImageMinor(%q) = %q, %v; want %q, %v", c.manifest, got, ok, c.want, c.ok)
		}
	}
	if got, ok := etcdutlMinor([]byte("etcdutl version: 3.6.16\nAPI version: 3.6\n")); got != "3.6" || !ok {
		t.Errorf("etcdutlMinor = %q, %v; want 3.6", got, ok)
	}
}
