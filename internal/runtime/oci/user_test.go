package oci

import (
	"os"
	"path/filepath"
	"testing"
)

func TestResolveUser(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0::/root:/bin/sh\nwww-data:x:33:33::/:/bin/sh\nalice:x:1000:1000::/:/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc/group"), []byte("root:x:0:\nwww-data:x:33:\nextra:x:50000:alice\n"), 0o644)
	u, err := ResolveUser(root, "www-data", nil, "", nil, false)
	if err != nil || u.UID != 33 || u.GID != 33 {
		t.Fatalf("www-data: %+v %v", u, err)
	}
	uid := int64(1000)
	u, _ = ResolveUser(root, "", &uid, "", nil, false)
	if u.UID != 1000 || u.GID != 1000 || len(u.AdditionalGids) != 1 || u.AdditionalGids[0] != 50000 {
		t.Fatalf("1000: %+v", u)
	}
	u, _ = ResolveUser(root, "", &uid, "", nil, true)
	if len(u.AdditionalGids) != 0 {
		t.Fatalf("strict: %+v", u)
	}
	g := int64(7)
	u, _ = ResolveUser(root, "1002:1003", nil, "", &g, false)
	if u.UID != 1002 || u.GID != 7 {
		t.Fatalf("override: %+v", u)
	}
	if _, err := ResolveUser(root, "nobody-here", nil, "", nil, false); err == nil {
		t.Fatal("expected error for unknown user")
	}
}
