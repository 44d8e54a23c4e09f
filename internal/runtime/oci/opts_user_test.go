package oci

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestWithSandboxUser(t *testing.T) {
	s := apply(t, WithSandboxUser(&runtimeapi.LinuxSandboxSecurityContext{RunAsUser: i64(7), RunAsGroup: i64(8), SupplementalGroups: []int64{9}}))
	if u := s.Process.User; u.UID != 7 || u.GID != 8 || !slices.Equal(u.AdditionalGids, []uint32{9}) {
		t.Fatalf("user %+v", u)
	}
	if u := apply(t, WithSandboxUser(nil)).Process.User; u.UID != 0 || u.GID != 0 || u.AdditionalGids != nil {
		t.Fatalf("default user %+v", u)
	}
}

func TestWithContainerUser(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/:/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc/group"), []byte("alice:x:1000:\nextra:x:50000:alice\n"), 0o644)
	merge := &runtimeapi.LinuxContainerSecurityContext{RunAsUser: i64(1000), SupplementalGroups: []int64{1000, 5}}
	if u := apply(t, WithContainerUser(root, "", merge)).Process.User; u.UID != 1000 || u.GID != 1000 || !slices.Equal(u.AdditionalGids, []uint32{1000, 5, 50000}) {
		t.Fatalf("merge policy %+v", u)
	}
	strict := &runtimeapi.LinuxContainerSecurityContext{RunAsUsername: "alice", SupplementalGroupsPolicy: runtimeapi.SupplementalGroupsPolicy_Strict}
	if u := apply(t, WithContainerUser(root, "", strict)).Process.User; !slices.Equal(u.AdditionalGids, []uint32{1000}) {
		t.Fatalf("strict policy %+v", u)
	}
	if u := apply(t, WithContainerUser(root, "alice:7", nil)).Process.User; u.UID != 1000 || u.GID != 7 {
		t.Fatalf("image user %+v", u)
	}
	for _, sc := range []*runtimeapi.LinuxContainerSecurityContext{{RunAsGroup: i64(1)}, {RunAsUsername: "bob"}} {
		if _, err := Build(root, false, WithContainerUser(root, "", sc)); err == nil {
			t.Errorf("%v accepted", sc)
		}
	}
}
