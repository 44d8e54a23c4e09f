package images

import "testing"

func TestParseRef(t *testing.T) {
	for in, want := range map[string]string{
		"busybox":                   "docker.io/library/busybox:latest",
		"busybox:1.29":              "docker.io/library/busybox:1.29",
		"registry.k8s.io/pause:3.9": "registry.k8s.io/pause:3.9",
		"gcr.io/k8s-staging-cri-tools/test-image-latest": "gcr.io/k8s-staging-cri-tools/test-image-latest:latest",
		"127.0.0.1:5000/a/b:c":                           "127.0.0.1:5000/a/b:c",
		"quay.io/x@sha256:9700f9a2f5bf2c45f2f605a0bd3bce7cf37420ec9d3ed50ac2758413308766bf": "quay.io/x@sha256:9700f9a2f5bf2c45f2f605a0bd3bce7cf37420ec9d3ed50ac2758413308766bf",
	} {
		r, err := ParseRef(in)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if r.String() != want {
			t.Errorf("%s: got %s want %s", in, r, want)
		}
	}
	if _, err := ParseRef("Bad Name"); err == nil {
		t.Fatal("expected error")
	}
}
