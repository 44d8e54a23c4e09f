package staticpod

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPodCgroupExists finds a pod's cgroup in every layout kubelet makes.
func TestPodCgroupExists(t *testing.T) {
	const uid = "9d2a030e209ce5ed46bfafecbfc9fe35"
	for _, layout := range []string{
		"cpu/kubepods/burstable/pod" + uid, // v1, cgroupfs, Burstable
		"memory/kubepods/pod" + uid,        // v1, cgroupfs, Guaranteed
		"kubepods/besteffort/pod" + uid,    // v2, cgroupfs
		"cpu/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uid + ".slice", // v1, systemd
		"kubepods.slice/kubepods-pod" + uid + ".slice",                                        // v2, systemd, Guaranteed
	} {
		root := t.TempDir()
		if PodCgroupExists(root, uid) {
			t.Fatalf("%s: found before it exists", layout)
		}
		if err := os.MkdirAll(filepath.Join(root, layout), 0o755); err != nil {
			t.Fatal(err)
		}
		if !PodCgroupExists(root, uid) {
			t.Errorf("%s: not found", layout)
		}
		if PodCgroupExists(root, "1b0b261e53d5290827a79b46a0da2cb9") {
			t.Errorf("%s: another pod's uid found", layout)
		}
	}
}
